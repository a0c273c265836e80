import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// `upload-64m`: a 64 MiB upload task to a server that never answers
/// `Expect: 100-continue` (SwiftNIO's HTTP server in this process, as
/// NIOResumableUpload and many others), sent as the session sends it (no
/// Expect) and with the caller's `Expect: 100-continue`, which makes
/// libcurl wait a second for the `100` as it did for every large body
/// before the session stopped sending one of its own.
enum UploadBenchmark {
    static let size = 64 << 20

    /// Takes a request's body and answers 201 at its end; never a 100.
    final class SinkHandler: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Length", value: "0")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .created, headers: headers))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    static func run(work: String, into table: inout [(figure: String, reference: String, ratio: Double)], lines: inout [String]) {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let server = startHTTPServer(group: group, named: "the upload sink") { SinkHandler() }
        defer { try? server.close().wait() }
        guard let port = server.localAddress?.port else { fail("the upload sink has no port") }
        let source = work + "/upload-64m"
        guard FileManager.default.createFile(atPath: source, contents: Data(count: size)) else { fail("cannot write \(source)") }
        defer { try? FileManager.default.removeItem(atPath: source) }
        let url = "http://127.0.0.1:\(port)/upload"
        var best: [String: SessionBenchmark.Figures] = [:]
        for _ in 0..<SessionBenchmark.runs {
            for mode in ["upload-task", "upload-task-expect"] {
                let figures = SessionBenchmark.parse(runChildText(["session-child", "ours", mode, url, "1", "1", source]))
                if best[mode].map({ figures.elapsed < $0.elapsed }) ?? true { best[mode] = figures }
            }
        }
        guard let plain = best["upload-task"], let expecting = best["upload-task-expect"] else { return }
        lines.append(
            "upload-64m (to a server that never sends 100 Continue): ours \(formatted(plain.elapsed * 1000)) ms; "
                + "with the caller's Expect: 100-continue (what every large body paid before) \(formatted(expecting.elapsed * 1000)) ms")
        table.append(("upload-64m", "ours-with-expect", plain.elapsed / expecting.elapsed))
    }
}

/// An HTTP/1.1 server on a loopback port the kernel chooses, in this
/// process, each connection served by a new `handler()`.
func startHTTPServer(
    group: MultiThreadedEventLoopGroup, named name: String, _ handler: @escaping @Sendable () -> some ChannelInboundHandler
) -> any Channel {
    do {
        return try ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(handler())
                }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
    } catch {
        fail("\(name) did not start: \(error)")
    }
}
