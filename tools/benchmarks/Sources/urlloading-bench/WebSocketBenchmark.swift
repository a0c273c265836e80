import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import URLLoading

/// `ws-echo` and `ws-100m`: our WebSocket task against a C
/// client on libwebsockets, both talking to one echo server (SwiftNIO's
/// WebSocket server in this process; each client runs in a process of its
/// own, so its CPU time is its own).
enum WebSocketBenchmark {
    static let echoMessages = 20_000
    static let echoSize = 1024
    static let bigSize = 100 << 20

    /// An echo server on loopback: every data frame goes back as it came
    /// (opcode and fin kept), pings are answered, a close is returned.
    static func startEchoServer(group: MultiThreadedEventLoopGroup) throws -> any Channel {
        let upgrader = NIOWebSocketServerUpgrader(
            maxFrameSize: 1 << 27, shouldUpgrade: { channel, _ in channel.eventLoop.makeSucceededFuture(HTTPHeaders()) },
            upgradePipelineHandler: { channel, _ in channel.pipeline.addHandler(EchoHandler()) })
        return try ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            // Room for ws-idle-10k's connects arriving together (the kernel
            // caps it at net.core.somaxconn).
            .serverChannelOption(.backlog, value: 4096)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline(withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
            }
            .bind(host: "127.0.0.1", port: 0).wait()
    }

    final class EchoHandler: ChannelInboundHandler, Sendable {
        typealias InboundIn = WebSocketFrame
        typealias OutboundOut = WebSocketFrame

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            switch frame.opcode {
            case .text, .binary, .continuation:
                context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: frame.fin, opcode: frame.opcode, data: frame.unmaskedData)), promise: nil)
            case .ping:
                context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
            case .connectionClose:
                let channel = context.channel
                context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: frame.unmaskedData)))
                    .whenComplete { _ in channel.close(promise: nil) }
            default:
                break
            }
        }
    }

    /// Runs both contenders in turns (best of `SessionBenchmark.runs`) and
    /// adds their figures and ratios.
    static func run(wsBench: String, into table: inout [(figure: String, reference: String, ratio: Double)], lines: inout [String]) {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let server: any Channel
        do { server = try startEchoServer(group: group) } catch { fail("the WebSocket echo server did not start: \(error)") }
        defer { try? server.close().wait() }
        guard let port = server.localAddress?.port else { fail("the echo server has no port") }
        func c(_ arguments: [String]) -> SessionBenchmark.Figures { SessionBenchmark.reference(wsBench, arguments) }
        let cases: [(figure: String, mode: String, count: Int, size: Int)] = [
            ("ws-echo", "echo", echoMessages, echoSize), ("ws-100m", "one", 1, bigSize),
        ]
        for (figure, mode, count, size) in cases {
            var best: [String: SessionBenchmark.Figures] = [:]
            func keep(_ name: String, _ figures: SessionBenchmark.Figures) {
                if best[name].map({ figures.elapsed < $0.elapsed }) ?? true { best[name] = figures }
            }
            for _ in 0..<SessionBenchmark.runs {
                keep("libwebsockets-c", c(mode == "echo" ? [mode, "\(port)", "\(count)", "\(size)"] : [mode, "\(port)", "\(size)"]))
                keep("ours", SessionBenchmark.parse(runChildText(["ws-child", "\(port)", "\(count)", "\(size)"])))
            }
            guard let ours = best["ours"], let reference = best["libwebsockets-c"] else { continue }
            table.append((figure, "libwebsockets-c", ours.elapsed / reference.elapsed))
            table.append((figure + "-cpu", "libwebsockets-c", ours.cpu / reference.cpu))
            func describe(_ name: String, _ figures: SessionBenchmark.Figures) -> String {
                mode == "echo"
                    ? "\(name) \(Int(Double(count) / figures.elapsed)) round trips/s, \(formatted(figures.cpu / Double(count) * 1e6)) µs CPU/message"
                    : "\(name) \(formatted(Double(size) / figures.elapsed / 1_048_576)) MiB/s echoed, peak RSS \(Int(figures.peakRSSKiB / 1024)) MiB"
            }
            lines.append("\(figure): \(describe("ours", ours)); \(describe("libwebsockets-c", reference))")
        }
    }

    /// Our client: `count` binary messages of `size` bytes, each sent and
    /// its echo received before the next.
    static func child(port: Int, count: Int, size: Int) async -> String {
        guard let url = URL(string: "ws://127.0.0.1:\(port)/") else { fail("bad port") }
        let session = Session(configuration: .ephemeral)
        let task = session.webSocketTask(with: url)
        task.maximumMessageSize = max(size, 1 << 20)
        task.resume()
        let message = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        do {
            // The opening handshake before the clock starts, as the C client's.
            try await task.send(.data(Data([1])))
            _ = try await task.receive()
        } catch { fail("the WebSocket did not open: \(error)") }
        let before = SessionBenchmark.rusage().cpu
        let start = now()
        var received = 0
        for _ in 0..<count {
            do {
                try await task.send(.data(message))
                guard case .data(let echo) = try await task.receive(), echo.count == size else { fail("a wrong echo") }
                received += echo.count
            } catch { fail("a message failed: \(error)") }
        }
        let elapsed = Double(now() - start) / 1e9
        let cpu = SessionBenchmark.rusage().cpu - before
        task.cancel(with: .normalClosure, reason: nil)
        return "\(elapsed) \(cpu) \(SessionBenchmark.rusage().rssKiB) \(received)"
    }
}
