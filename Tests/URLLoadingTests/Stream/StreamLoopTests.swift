import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// Stream connections share a few loop threads: many connections on
/// them at once, TLS among them, and one connection's unread input
/// holding back none of the others.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(3))))
struct StreamLoopTests {
    /// The process's threads.
    static func threads() -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []).count
    }

    @Test("300 stream tasks open at once, 20 of them over TLS, each echoing its own lines: they run on the few stream loops, not a thread each")
    func manyConnections() async throws {
        let server = try await TestStreamServer.start()
        let session = try StreamTaskTests.session(trustingTestCA: true)
        let threadsBefore = Self.threads()
        let tasks = (0..<300).map { _ in session.streamTask(withHostName: "localhost", port: server.port) }
        tasks.forEach { $0.resume() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, task) in tasks.enumerated() {
                group.addTask {
                    if index < 20 {
                        try await task.write(StreamTaskTests.line("STARTTLS"), timeout: StreamTaskTests.bound)
                        #expect(try await StreamTaskTests.read(task, count: 4).0 == StreamTaskTests.line("OK"))
                        task.startSecureConnection()
                    }
                    for round in 0..<3 {
                        try await task.write(StreamTaskTests.line("\(index).\(round)"), timeout: StreamTaskTests.bound)
                        let expected = StreamTaskTests.line("echo: \(index).\(round)")
                        #expect(try await StreamTaskTests.read(task, count: expected.count).0 == expected)
                    }
                }
            }
            try await group.waitForAll()
        }
        // Every connection is still open here. (A thread each would be 300 more.)
        let added = Self.threads() - threadsBefore
        #expect(added < 40, "threads added for 300 connections: \(added)")
        tasks.forEach { $0.cancel() }
        try await server.shutdown()
    }

    @Test("A connection whose 8 MB answer nobody reads holds back no other connection on its loop; its bytes are all there when read")
    func slowConsumer() async throws {
        let server = try await TestStreamServer.start()
        let session = try StreamTaskTests.session()
        let idle = session.streamTask(withHostName: "127.0.0.1", port: server.port)
        idle.resume()
        let size = 8_000_000
        try await idle.write(StreamTaskTests.line("BIG \(size)"), timeout: StreamTaskTests.bound)
        // Sixteen others, enough to share a loop with the idle one, echo meanwhile.
        let others = (0..<16).map { _ in session.streamTask(withHostName: "127.0.0.1", port: server.port) }
        others.forEach { $0.resume() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, task) in others.enumerated() {
                group.addTask {
                    for round in 0..<20 {
                        try await task.write(StreamTaskTests.line("\(index)/\(round)"), timeout: StreamTaskTests.bound)
                        let expected = StreamTaskTests.line("echo: \(index)/\(round)")
                        #expect(try await StreamTaskTests.read(task, count: expected.count).0 == expected)
                    }
                }
            }
            try await group.waitForAll()
        }
        let (data, atEOF) = try await StreamTaskTests.read(idle, count: size + 2)
        #expect(data.count == size + 2 && !atEOF)
        #expect(data.prefix(size) == Data(TestOrigin.pattern(offset: 0, count: size)))
        (others + [idle]).forEach { $0.cancel() }
        try await server.shutdown()
    }

    /// A listening socket whose queue is full and never accepted from: the
    /// kernel drops further connects' SYNs, so they hang as to a host that
    /// drops packets.
    final class FullListenQueue {
        let port: Int
        private var descriptors: [Int32] = []

        init() throws {
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                    bind(listener, raw, length) == 0 && listen(listener, 0) == 0 && getsockname(listener, raw, &length) == 0
                }
            }
            descriptors = [listener]
            guard listener >= 0, bound else { throw POSIXError(.EADDRNOTAVAIL) }
            port = Int(UInt16(bigEndian: address.sin_port))
            // Fill the queue (a backlog of 0 holds one) with connects of our own.
            for _ in 0..<2 {
                let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                descriptors.append(filler)
                _ = withUnsafePointer(to: &address) { pointer in
                    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
            }
        }

        deinit { descriptors.forEach { close($0) } }
    }

    @Test("Twelve connects hanging on a host that drops them (more than the connecting threads) hold back no other connection, which connects and echoes while they still hang")
    func hangingConnects() async throws {
        let server = try await TestStreamServer.start()
        let blackhole = try FullListenQueue()
        let configuration = SessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 120
        let hanging = Session(configuration: configuration)
        let stuck = (0..<12).map { _ in hanging.streamTask(withHostName: "127.0.0.1", port: blackhole.port) }
        stuck.forEach { $0.resume() }
        // A write on a hanging connection ends only when its connect times out.
        let settled = Lock(0)
        for task in stuck { task.write(StreamTaskTests.line("never"), timeout: 120) { _ in settled.withLock { $0 += 1 } } }
        let task = try StreamTaskTests.session().streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        try await task.write(StreamTaskTests.line("through"), timeout: 120)
        let expected = StreamTaskTests.line("echo: through")
        #expect(try await StreamTaskTests.read(task, count: expected.count).0 == expected)
        // Done while the others still hang: a connect queued behind them
        // would have waited until their connects timed out and their writes failed.
        #expect(settled.withLock { $0 } == 0, "hanging connects that ended before the echo: \(settled.withLock { $0 })")
        (stuck + [task]).forEach { $0.cancel() }
        try await server.shutdown()
        withExtendedLifetime(blackhole) {}
    }
}
