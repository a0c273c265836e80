public import Foundation
import HTTPTypes
import Locking
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOPosix
import NIOResumableUpload

/// Apple's server side of resumable uploads (SwiftNIO's
/// `NIOResumableUpload`, written to interoperate with URLSession) on a
/// loopback port, in front of a handler that keeps each upload's bytes.
/// With `cutAfter`, the first connection whose request bytes reach that
/// many is closed there, mid-body, as a dropped connection would be: the
/// server keeps what it read, the client's bytes still on their way are lost.
/// With `holdAfter`, that connection is not closed but stops being read
/// (the client's later bytes wait in the sockets, and are never processed):
/// the upload stays unfinished whatever the client does, until it gives up.
public final class TestResumableUploadServer: Sendable {
    public let port: Int
    /// `http://127.0.0.1:<port>`, the origin the server's resumption URLs are on.
    public var origin: String { "http://127.0.0.1:\(port)" }
    private let channel: any Channel
    private let group: MultiThreadedEventLoopGroup
    private let shared: Shared

    final class Shared: Sendable {
        struct State {
            var cutAfter: Int?
            /// The connection that reaches `cutAfter` is held, not closed.
            var holds = false
            /// The body bytes the held connection passed on before it was held.
            var heldBody: Int?
            var requests: [String] = []
            var bodyBytes = 0
            var uploads: [String: Data] = [:]
            var received: [String: Int] = [:]
        }
        let state: Lock<State>
        init(cutAfter: Int?, holds: Bool) { state = Lock(State(cutAfter: cutAfter, holds: holds)) }
    }

    private init(port: Int, channel: any Channel, group: MultiThreadedEventLoopGroup, shared: Shared) {
        self.port = port
        self.channel = channel
        self.group = group
        self.shared = shared
    }

    /// Starts the server on 127.0.0.1.
    public static func start(cutAfter: Int? = nil, holdAfter: Int? = nil) async throws -> TestResumableUploadServer {
        let reserved = try ReservedPort()
        let port = reserved.port
        reserved.release()
        let shared = Shared(cutAfter: cutAfter ?? holdAfter, holds: holdAfter != nil)
        let context = HTTPResumableUploadContext(origin: "http://127.0.0.1:\(port)")
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(Cutter(shared: shared))
                    try sync.configureHTTPServerPipeline()
                    try sync.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                    try sync.addHandler(Recorder(shared: shared))
                    try sync.addHandler(HTTPResumableUploadHandler(context: context, handlers: [Keeper(shared: shared)]))
                }
            }
        do {
            let channel = try await bootstrap.bind(host: "127.0.0.1", port: port).get()
            return TestResumableUploadServer(port: port, channel: channel, group: group, shared: shared)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// Each request as it reached the server: `METHOD path`, and ` offset N` when it carried `Upload-Offset`.
    public var requests: [String] { shared.state.withLock { $0.requests } }
    /// Request body bytes the server read, over every connection.
    public var bodyBytes: Int { shared.state.withLock { $0.bodyBytes } }
    /// The body bytes the held connection passed on before it was held
    /// (nil before, or when its request head was not in its first read).
    public var heldBodyBytes: Int? { shared.state.withLock { $0.heldBody } }
    /// The body bytes of the upload to `path` that reached the application
    /// so far (the resumable handler passes them on in its own time).
    public func received(_ path: String) -> Int { shared.state.withLock { $0.received[path] ?? 0 } }
    /// What the upload to `path` stored, once its last byte came.
    public func upload(_ path: String) -> Data? { shared.state.withLock { $0.uploads[path] } }

    public func shutdown() async throws {
        try await channel.close()
        try await group.shutdownGracefully()
    }

    /// Closes (or holds) the first connection whose inbound bytes reach the budget, after passing those on.
    final class Cutter: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias InboundOut = ByteBuffer
        let shared: Shared
        /// This connection is held: nothing more of it is read or passed on.
        private var held = false
        /// Bytes passed on, and where the first request's head ended in them.
        private var passed = 0
        private var headLength: Int?
        init(shared: Shared) { self.shared = shared }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !held else { return }
            var buffer = unwrapInboundIn(data)
            if headLength == nil, passed == 0, let end = buffer.readableBytesView.firstRange(of: Array("\r\n\r\n".utf8)) {
                headLength = buffer.readableBytesView.distance(from: buffer.readableBytesView.startIndex, to: end.upperBound)
            }
            let cut = shared.state.withLock { state -> (allowed: Int, holds: Bool)? in
                guard let left = state.cutAfter else { return nil }
                let allowed = min(left, buffer.readableBytes)
                state.cutAfter = left - allowed > 0 ? left - allowed : nil
                return left - allowed > 0 ? nil : (allowed, state.holds)
            }
            guard let cut else {
                passed += buffer.readableBytes
                context.fireChannelRead(wrapInboundOut(buffer))
                return
            }
            if let slice = buffer.readSlice(length: cut.allowed) { context.fireChannelRead(wrapInboundOut(slice)) }
            if cut.holds {
                held = true
                let body = headLength.map { passed + cut.allowed - $0 }
                shared.state.withLock { $0.heldBody = body }
                context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
            } else {
                context.close(promise: nil)
            }
        }
    }

    /// Notes each request's head and counts its body bytes.
    final class Recorder: ChannelInboundHandler {
        typealias InboundIn = HTTPRequestPart
        typealias InboundOut = HTTPRequestPart
        let shared: Shared
        init(shared: Shared) { self.shared = shared }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let request):
                let offset = request.headerFields[HTTPField.Name("Upload-Offset")!].map { " offset \($0)" } ?? ""
                shared.state.withLock { $0.requests.append("\(request.method.rawValue) \(request.path ?? "")\(offset)") }
            case .body(let body):
                shared.state.withLock { $0.bodyBytes += body.readableBytes }
            case .end:
                break
            }
            context.fireChannelRead(data)
        }
    }

    /// The application behind the resumable handler: keeps an upload's bytes and answers 201 at its end.
    final class Keeper: ChannelInboundHandler {
        typealias InboundIn = HTTPRequestPart
        typealias OutboundOut = HTTPResponsePart
        let shared: Shared
        private var path: String?
        private var bytes = Data()
        init(shared: Shared) { self.shared = shared }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let request):
                path = request.path
                bytes = Data()
            case .body(let body):
                bytes.append(contentsOf: body.readableBytesView)
                let (path, count) = (path ?? "", body.readableBytes)
                shared.state.withLock { $0.received[path, default: 0] += count }
            case .end:
                let (path, bytes) = (path ?? "", bytes)
                shared.state.withLock { $0.uploads[path] = bytes }
                var response = HTTPResponse(status: .created)
                response.headerFields[.contentLength] = "\(String(bytes.count).utf8.count + 7)"
                context.write(wrapOutboundOut(.head(response)), promise: nil)
                context.write(wrapOutboundOut(.body(ByteBuffer(string: "stored \(bytes.count)"))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }
}
