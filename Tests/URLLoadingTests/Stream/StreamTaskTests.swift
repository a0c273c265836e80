import Foundation
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// Stream tasks against a line server on loopback: echo,
/// order, STARTTLS, half-closes, big reads, timeouts, failures, a proxy's
/// tunnel.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2))))
struct StreamTaskTests {
    /// Records the stream delegate's calls.
    final class StreamEvents: SessionStreamDelegate, Sendable {
        let seen = Lock<[String]>([])
        func urlSession(_ session: Session, readClosedFor streamTask: SessionStreamTask) { seen.withLock { $0.append("read-closed") } }
        func urlSession(_ session: Session, writeClosedFor streamTask: SessionStreamTask) { seen.withLock { $0.append("write-closed") } }
    }

    static func session(trustingTestCA: Bool = false, proxy: URL? = nil, delegate: (any SessionDelegate)? = nil) throws -> Session {
        let configuration = SessionConfiguration.ephemeral
        if trustingTestCA { configuration.trustRootsFile = try TestCertificates.shared().caCertificatePath }
        configuration.proxyURL = proxy
        return Session(configuration: configuration, delegate: delegate)
    }

    /// A bound on one read or write of a test with many connections at
    /// once: 20 s, widened under a sanitizer (ThreadSanitizer's TLS
    /// handshakes keep a loop busy for seconds).
    static var bound: TimeInterval { TimeInterval(20 * Sanitizer.timeScale) }

    /// Reads until `count` bytes or the end.
    static func read(_ task: SessionStreamTask, count: Int) async throws -> (Data, Bool) {
        var data = Data()
        while data.count < count {
            let (chunk, atEOF) = try await task.readData(ofMinLength: 1, maxLength: count - data.count, timeout: bound)
            data.append(chunk ?? Data())
            if atEOF { return (data, true) }
        }
        return (data, false)
    }

    static func line(_ text: String) -> Data { Data("\(text)\r\n".utf8) }

    @Test("Lines written come back; operations queued before resume() run after it, in order")
    func echo() async throws {
        let server = try await TestStreamServer.start()
        let session = try Self.session()
        let task = session.streamTask(withHostName: "127.0.0.1", port: server.port)
        // Queued before the connection exists.
        let first = Lock<[String]>([])
        task.write(Self.line("one"), timeout: 10) { error in first.withLock { $0.append("wrote \(error == nil)") } }
        task.write(Self.line("two"), timeout: 10) { error in first.withLock { $0.append("wrote \(error == nil)") } }
        task.resume()
        #expect(task.state == .running)
        let expected = Self.line("echo: one") + Self.line("echo: two")
        let (data, atEOF) = try await Self.read(task, count: expected.count)
        #expect(data == expected && !atEOF)
        #expect(first.withLock { $0 } == ["wrote true", "wrote true"])
        try await task.write(Self.line("three"), timeout: 10)
        #expect(try await Self.read(task, count: 13).0 == Self.line("echo: three"))
        #expect(server.received == ["one", "two", "three"])
        task.cancel()
        try await server.shutdown()
    }

    @Test("STARTTLS: the answer in the clear, then TLS checked against the session's roots; the server reads the secret line decrypted")
    func startTLS() async throws {
        let server = try await TestStreamServer.start()
        let session = try Self.session(trustingTestCA: true)
        // The test certificate is issued for localhost.
        let task = session.streamTask(withHostName: "localhost", port: server.port)
        task.resume()
        try await task.write(Self.line("STARTTLS"), timeout: 10)
        #expect(try await Self.read(task, count: 4).0 == Self.line("OK"))
        task.startSecureConnection()
        try await task.write(Self.line("secret"), timeout: 10)
        #expect(try await Self.read(task, count: 14).0 == Self.line("echo: secret"))
        // A big answer over TLS, in reads of at most 64 KiB.
        let count = 3 << 20
        try await task.write(Self.line("BIG \(count)"), timeout: 10)
        let (big, _) = try await Self.read(task, count: count + 2)
        #expect(big.count == count + 2 && big.prefix(count) == Data(TestOrigin.pattern(offset: 0, count: count)))
        #expect(server.received == ["STARTTLS", "secret", "BIG \(count)"])
        task.cancel()
        try await server.shutdown()
    }

    @Test("STARTTLS to a server whose certificate the session does not trust fails the task; nothing after it is sent")
    func untrusted() async throws {
        let server = try await TestStreamServer.start()
        // System roots only: the test CA is not among them.
        let session = try Self.session()
        let task = session.streamTask(withHostName: "localhost", port: server.port)
        task.resume()
        try await task.write(Self.line("STARTTLS"), timeout: 10)
        #expect(try await Self.read(task, count: 4).0 == Self.line("OK"))
        task.startSecureConnection()
        await #expect(throws: URLError.self) { try await task.write(Self.line("secret"), timeout: 10) }
        let error = task.error as? URLError
        #expect(error?.code == .serverCertificateUntrusted, "\(String(describing: task.error))")
        #expect(task.state == .completed)
        #expect(!server.received.contains("secret"))
        try await server.shutdown()
    }

    @Test("closeWrite: the server reads the end and answers; the reads see the end; the delegate hears both sides close; the task completes")
    func halfClose() async throws {
        let server = try await TestStreamServer.start()
        let events = StreamEvents()
        let session = try Self.session(delegate: events)
        let task = session.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        task.write(Self.line("last"), timeout: 10) { _ in }
        task.closeWrite()
        let expected = Self.line("echo: last") + Self.line("EOF")
        let (data, atEOF) = try await Self.read(task, count: expected.count + 1)
        #expect(data == expected && atEOF)
        #expect(await eventually { task.state == .completed })
        #expect(events.seen.withLock { $0 } == ["write-closed", "read-closed"])
        // After the end, a write fails at once.
        await #expect(throws: URLError.self) { try await task.write(Self.line("late"), timeout: 10) }
        try await server.shutdown()
    }

    @Test("A read with a timeout and no data fails timedOut and the connection goes on; 0 means no timeout")
    func timeouts() async throws {
        let server = try await TestStreamServer.start()
        let session = try Self.session()
        let task = session.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        let started = ContinuousClock.now
        do {
            _ = try await task.readData(ofMinLength: 1, maxLength: 10, timeout: 0.3)
            Issue.record("the read returned with nothing sent")
        } catch let error as URLError {
            #expect(error.code == .timedOut)
        }
        #expect(ContinuousClock.now - started >= .milliseconds(290))
        // A read without a timeout, answered later.
        async let answer = task.readData(ofMinLength: 10, maxLength: 100, timeout: 0)
        try await task.write(Self.line("late"), timeout: 10)
        #expect(try await answer.0 == Self.line("echo: late"))
        task.cancel()
        try await server.shutdown()
    }

    @Test("Failures: nothing listening is cannotConnectToHost, an unknown name cannotFindHost; cancel() fails a waiting read with cancelled")
    func failures() async throws {
        let session = try Self.session()
        // Bound, not listening: refused, and no parallel test's server can take it.
        let closed = try ReservedPort()
        defer { closed.release() }
        let refused = session.streamTask(withHostName: "127.0.0.1", port: closed.port)
        refused.resume()
        await #expect(throws: URLError.self) { _ = try await refused.readData(ofMinLength: 1, maxLength: 1, timeout: 10) }
        #expect((refused.error as? URLError)?.code == .cannotConnectToHost)

        let unknown = session.streamTask(withHostName: "no-such-host.invalid", port: 80)
        unknown.resume()
        await #expect(throws: URLError.self) { _ = try await unknown.readData(ofMinLength: 1, maxLength: 1, timeout: 10) }
        #expect((unknown.error as? URLError)?.code == .cannotFindHost)

        let server = try await TestStreamServer.start()
        let waiting = session.streamTask(withHostName: "127.0.0.1", port: server.port)
        waiting.resume()
        async let read = waiting.readData(ofMinLength: 1, maxLength: 1, timeout: 0)
        try await waiting.write(Self.line("ping"), timeout: 10)
        _ = try await read
        async let never = waiting.readData(ofMinLength: 100, maxLength: 100, timeout: 0)
        waiting.cancel()
        do {
            _ = try await never
            Issue.record("a cancelled read returned data")
        } catch let error as URLError {
            #expect(error.code == .cancelled)
        }
        try await server.shutdown()
    }

    @Test("Through the session's proxy: a CONNECT tunnel to the server, then the same conversation")
    func proxyTunnel() async throws {
        let server = try await TestStreamServer.start()
        let proxy = try TestProxy(user: "u", password: "p", openTunnels: true)
        let session = try Self.session(proxy: proxy.url)
        let task = session.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        try await task.write(Self.line("via proxy"), timeout: 10)
        #expect(try await Self.read(task, count: 17).0 == Self.line("echo: via proxy"))
        #expect(proxy.received.first?.requestLine == "CONNECT 127.0.0.1:\(server.port) HTTP/1.1")
        task.cancel()
        proxy.shutdown()
        try await server.shutdown()
    }

    /// Hears the session's invalidation.
    final class InvalidationEvents: SessionStreamDelegate, Sendable {
        let invalid = Lock(false)
        func urlSession(_ session: Session, didBecomeInvalidWithError error: (any Error)?) { invalid.withLock { $0 = true } }
    }

    @Test("finishTasksAndInvalidate waits for a running stream task: the session is invalid only after it ends")
    func finishWaitsForStreamTasks() async throws {
        let server = try await TestStreamServer.start()
        let delegate = InvalidationEvents()
        let session = try Self.session(delegate: delegate)
        let task = session.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        session.finishTasksAndInvalidate()
        // The task goes on after the call, and the session waits for it.
        try await task.write(Self.line("still here"), timeout: 10)
        #expect(try await Self.read(task, count: 18).0 == Self.line("echo: still here"))
        #expect(!delegate.invalid.withLock { $0 })
        task.cancel()
        #expect(await eventually { delegate.invalid.withLock { $0 } })
        try await server.shutdown()
    }
}
