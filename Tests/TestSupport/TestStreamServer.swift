import Foundation
import Locking
import NIOCore
import NIOPosix
import NIOSSL

/// A line protocol on loopback for stream tasks: each line
/// (ending in CRLF) comes back with "echo: " before it, except
///
/// - `STARTTLS`: answers `OK`, then speaks TLS (the test certificate);
/// - `STOPTLS`: answers `OK`, then ends TLS and goes on in the clear;
/// - `BIG n`: answers n bytes of `TestOrigin.pattern`, then CRLF;
/// - `QUIT`: answers `BYE` and closes.
///
/// When the client ends its write side, the server answers `EOF` and closes.
public final class TestStreamServer: Sendable {
    private let channel: any Channel
    /// The listening port on 127.0.0.1.
    public let port: Int
    private let record: LineRecord

    private init(channel: any Channel, port: Int, record: LineRecord) {
        self.channel = channel
        self.port = port
        self.record = record
    }

    /// Every line the server read, in order (across connections).
    public var received: [String] { record.lines.withLock { $0 } }

    /// Starts a server on a port the kernel chooses.
    public static func start() async throws -> TestStreamServer {
        _ = Self.decoderMetadataReady
        let sslContext = try TestCertificates.shared().server.makeServerContext()
        let record = LineRecord()
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            // Room for every connection a test opens at once (300): beyond
            // the accept queue (NIO's default is 128), a connection made
            // while a starved test accepts nothing waits on the kernel's
            // retries and can be lost.
            .serverChannelOption(.backlog, value: 512)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineDecoder()))
                    try channel.pipeline.syncOperations.addHandler(LineHandler(sslContext: sslContext, record: record))
                }
            }
        let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        guard let port = channel.localAddress?.port else { throw TestOriginError(message: "the listening socket has no port") }
        return TestStreamServer(channel: channel, port: port, record: record)
    }

    /// The line decoder's handler, made once on one thread before any event
    /// loop makes one (`TestOrigin` says which runtime crash this avoids).
    private static let decoderMetadataReady: Void = {
        _ = ByteToMessageHandler(LineDecoder())
    }()

    /// Stops listening (open connections end with the process's loop).
    public func shutdown() async throws {
        try await channel.close()
    }
}

/// The lines a server read.
private final class LineRecord: Sendable {
    let lines = Lock<[String]>([])
}

/// Lines ending in LF (a CR before it dropped).
private struct LineDecoder: ByteToMessageDecoder {
    typealias InboundOut = String

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let end = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) else { return .needMoreData }
        let length = end - buffer.readerIndex
        guard var line = buffer.readString(length: length) else { return .needMoreData }
        buffer.moveReaderIndex(forwardBy: 1)
        if line.hasSuffix("\r") { line.removeLast() }
        context.fireChannelRead(NIOAny(line))
        return .continue
    }
}

private final class LineHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = String
    typealias OutboundOut = ByteBuffer
    private let sslContext: NIOSSLContext
    private let record: LineRecord

    init(sslContext: NIOSSLContext, record: LineRecord) {
        self.sslContext = sslContext
        self.record = record
    }

    private func send(_ text: String, context: ChannelHandlerContext) -> EventLoopFuture<Void> {
        context.writeAndFlush(NIOAny(context.channel.allocator.buffer(string: text)))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let line = unwrapInboundIn(data)
        record.lines.withLock { $0.append(line) }
        let pipeline = context.pipeline
        let channel = context.channel
        switch line {
        case "STARTTLS":
            // The answer goes in the clear; TLS starts with the client's next
            // bytes, which it sends only after reading the answer.
            send("OK\r\n", context: context).whenSuccess {
                try? pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: self.sslContext), position: .first)
            }
        case "STOPTLS":
            send("OK\r\n", context: context).whenSuccess {
                if let handler = try? pipeline.syncOperations.handler(type: NIOSSLServerHandler.self) {
                    // Ends TLS (close_notify both ways), then the clear stream goes on.
                    handler.stopTLS(promise: nil)
                }
            }
        case "QUIT":
            send("BYE\r\n", context: context).whenComplete { _ in channel.close(promise: nil) }
        case let big where big.hasPrefix("BIG "):
            let count = Int(big.dropFirst(4)).map { min(max(0, $0), 64 << 20) } ?? 0
            var buffer = channel.allocator.buffer(capacity: count + 2)
            buffer.writeBytes(TestOrigin.pattern(offset: 0, count: count))
            buffer.writeString("\r\n")
            context.writeAndFlush(NIOAny(buffer), promise: nil)
        default:
            _ = send("echo: \(line)\r\n", context: context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event {
            let channel = context.channel
            send("EOF\r\n", context: context).whenComplete { _ in channel.close(promise: nil) }
        }
        context.fireUserInboundEventTriggered(event)
    }
}
