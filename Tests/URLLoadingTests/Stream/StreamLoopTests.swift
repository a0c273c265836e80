import Foundation
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
                        try await task.write(StreamTaskTests.line("STARTTLS"), timeout: 20)
                        #expect(try await StreamTaskTests.read(task, count: 4).0 == StreamTaskTests.line("OK"))
                        task.startSecureConnection()
                    }
                    for round in 0..<3 {
                        try await task.write(StreamTaskTests.line("\(index).\(round)"), timeout: 20)
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
        try await idle.write(StreamTaskTests.line("BIG \(size)"), timeout: 20)
        // Sixteen others, enough to share a loop with the idle one, echo meanwhile.
        let others = (0..<16).map { _ in session.streamTask(withHostName: "127.0.0.1", port: server.port) }
        others.forEach { $0.resume() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, task) in others.enumerated() {
                group.addTask {
                    for round in 0..<20 {
                        try await task.write(StreamTaskTests.line("\(index)/\(round)"), timeout: 20)
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
}
