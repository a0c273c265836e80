import Foundation
import HTTPTypes
import Locking
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOPosix
import NIOResumableUpload

#if canImport(Glibc)
import Glibc
#endif

/// `upload-resume-1g`: a 1 GiB upload task to SwiftNIO's
/// `NIOResumableUpload` (Apple's server side of resumable uploads, in this
/// process) whose first connection is closed when half the file arrived.
/// The session asks the resumption URL for the offset and sends the rest:
/// the figure is the body bytes the server read over every connection
/// against the file's size (1.00x is the file once; without resumable
/// uploads it would be 1.5x, and a failed task).
enum ResumableUploadBenchmark {
    static let size: Int64 = 1 << 30

    /// Counts what reaches the server; `cutAfter` bytes into the first connection, closes it.
    final class Counts: Sendable {
        struct State {
            var cutAfter: Int?
            var bodyBytes = 0
            var requests: [String] = []
        }
        let state: Lock<State>
        init(cutAfter: Int) { state = Lock(State(cutAfter: cutAfter)) }
    }

    /// Closes the first connection whose bytes reach the budget, after passing those on.
    final class Cutter: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias InboundOut = ByteBuffer
        let counts: Counts
        init(counts: Counts) { self.counts = counts }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            let allowed = counts.state.withLock { state -> Int? in
                guard let left = state.cutAfter else { return nil }
                let allowed = min(left, buffer.readableBytes)
                state.cutAfter = left - allowed > 0 ? left - allowed : nil
                return left - allowed > 0 ? nil : allowed
            }
            guard let allowed else { return context.fireChannelRead(wrapInboundOut(buffer)) }
            if let slice = buffer.readSlice(length: allowed) { context.fireChannelRead(wrapInboundOut(slice)) }
            context.close(promise: nil)
        }
    }

    /// Counts each request's body bytes, and notes its method and path.
    final class Recorder: ChannelInboundHandler {
        typealias InboundIn = HTTPRequestPart
        typealias InboundOut = HTTPRequestPart
        let counts: Counts
        init(counts: Counts) { self.counts = counts }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let request): counts.state.withLock { $0.requests.append("\(request.method.rawValue) \(request.path ?? "")") }
            case .body(let body): counts.state.withLock { $0.bodyBytes += body.readableBytes }
            case .end: break
            }
            context.fireChannelRead(data)
        }
    }

    /// The application: answers 201 with the upload's length at its end, keeping nothing.
    final class Answer: ChannelInboundHandler {
        typealias InboundIn = HTTPRequestPart
        typealias OutboundOut = HTTPResponsePart
        private var received = 0

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head: received = 0
            case .body(let body): received += body.readableBytes
            case .end:
                let text = "stored \(received)"
                var response = HTTPResponse(status: .created)
                response.headerFields[.contentLength] = "\(text.utf8.count)"
                context.write(wrapOutboundOut(.head(response)), promise: nil)
                context.write(wrapOutboundOut(.body(ByteBuffer(string: text))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }

    static func run(work: String, into table: inout [(figure: String, reference: String, ratio: Double)], lines: inout [String]) {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let counts = Counts(cutAfter: Int(size / 2))
        // The resumption URLs name the origin the client uses: the port is chosen first.
        let port = freePort()
        let context = HTTPResumableUploadContext(origin: "http://127.0.0.1:\(port)")
        let server: any Channel
        do {
            server = try ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        try sync.addHandler(Cutter(counts: counts))
                        try sync.configureHTTPServerPipeline()
                        try sync.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                        try sync.addHandler(Recorder(counts: counts))
                        try sync.addHandler(HTTPResumableUploadHandler(context: context, handlers: [Answer()]))
                    }
                }
                .bind(host: "127.0.0.1", port: port).wait()
        } catch {
            fail("the resumable upload server did not start: \(error)")
        }
        defer { try? server.close().wait() }
        let source = work + "/upload-resume-1g"
        let descriptor = open(source, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard descriptor >= 0, ftruncate(descriptor, off_t(size)) == 0 else { fail("cannot make \(source)") }
        close(descriptor)
        defer { unlink(source) }
        let figures = SessionBenchmark.parse(runChildText(["session-child", "ours", "upload-task", "http://127.0.0.1:\(port)/files/big", "1", "1", source]))
        let (bodyBytes, requests) = counts.state.withLock { ($0.bodyBytes, $0.requests) }
        let ratio = Double(bodyBytes) / Double(size)
        lines.append(
            "upload-resume-1g (1 GiB to NIOResumableUpload, the first connection closed at half): \(bodyBytes) body bytes at the server "
                + "for a \(size)-byte file in \(formatted(figures.elapsed)) s; requests \(requests.map { $0.split(separator: " ")[0] }.joined(separator: ", "))")
        table.append(("upload-resume-1g", "file-size", ratio))
    }

    /// A loopback port nothing listens on now (the kernel's choice).
    static func freePort() -> Int {
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(probe) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(probe, $0, length) == 0 && getsockname(probe, $0, &length) == 0 }
        }
        guard bound else { fail("no free loopback port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
