import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// bytes(for:), TLS through the session, metrics.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct SessionStreamingAndTLSTests {
    @Test("S5: bytes(for:) streams a large body with back-pressure, every byte in order")
    func byteStream() async throws {
        let origin = try await TestOrigin.start()
        let size = 8_000_000
        origin.route("/big", response: ScriptedResponse(parts: [.pattern(offset: 0, count: size)]))
        let session = Session(configuration: .ephemeral)
        let (stream, response) = try await session.bytes(for: URLRequest(url: origin.url("/big")))
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        var received = 0
        var chunks = 0
        for try await chunk in stream.chunks {
            #expect(Array(chunk) == TestOrigin.pattern(offset: received, count: chunk.count))
            received += chunk.count
            chunks += 1
            // A slow reader: the transfer must wait for it, never drop bytes.
            if chunks % 16 == 0 { await Task.yield() }
        }
        #expect(received == size)
        let (bytes, _) = try await session.bytes(from: origin.url("/big"))
        var count = 0
        for try await _ in bytes { count += 1; if count == 1000 { break } }
        #expect(count == 1000)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("S3: the request timeout counts the server's silence, not a slow reader's back-pressure")
    func slowReaderIsNotATimeout() async throws {
        let origin = try await TestOrigin.start(ownThread: true)
        let size = 4_000_000
        origin.route("/big", response: ScriptedResponse(parts: [.pattern(offset: 0, count: size)]))
        let configuration = SessionConfiguration.ephemeral
        // Seconds, not less: the origin shares two cores with the whole suite.
        configuration.timeoutIntervalForRequest = 6
        let session = Session(configuration: configuration)
        let (stream, _) = try await session.bytes(from: origin.url("/big"))
        // The reader is the thing under test: it stalls longer than the timeout.
        try await Task.sleep(for: .seconds(8))
        var received = 0
        for try await chunk in stream.chunks { received += chunk.count }
        #expect(received == size)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A4: custom trust roots from the configuration; the system's roots reject the test CA")
    func tlsTrustRoots() async throws {
        let certificates = try TestCertificates.shared()
        let origin = try await TestOrigin.start(tls: certificates.server)
        origin.route("/s", response: ScriptedResponse(body: "secure"))
        let configuration = SessionConfiguration.ephemeral
        configuration.trustRootsFile = certificates.caCertificatePath
        configuration.tlsMinimumSupportedVersion = (1, 2)
        let trusting = Session(configuration: configuration)
        let (data, _) = try await trusting.data(from: origin.url("/s"))
        #expect(data == Data("secure".utf8))
        let strict = SessionConfiguration.ephemeral
        strict.trustRootsFile = "/etc/ssl/certs/ca-certificates.crt"
        let untrusting = Session(configuration: strict)
        let error = await #expect(throws: URLError.self) { _ = try await untrusting.data(from: origin.url("/s")) }
        #expect(error?.code == .serverCertificateUntrusted)
        trusting.finishTasksAndInvalidate()
        untrusting.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("S4: metrics from libcurl's timing info, one transaction per hop, connection reuse seen")
    func metrics() async throws {
        final class MetricsDelegate: SessionDelegate {
            let collected = Lock<[TaskMetrics]>([])
            func urlSession(_ session: Session, task: SessionTask, didFinishCollecting metrics: TaskMetrics) {
                collected.withLock { $0.append(metrics) }
            }
        }
        let origin = try await TestOrigin.start()
        origin.route("/r", Routes.redirect(to: "/m"))
        origin.route("/m", response: ScriptedResponse(body: "12345"))
        let delegate = MetricsDelegate()
        let session = Session(configuration: .ephemeral, delegate: delegate)
        _ = try await session.data(for: URLRequest(url: origin.url("/r")), delegate: delegate)
        let metrics = try #require(delegate.collected.withLock { $0.first })
        #expect(metrics.redirectCount == 1)
        #expect(metrics.transactions.count == 2)
        #expect(metrics.transactions.map(\.statusCode) == [302, 200])
        let last = try #require(metrics.transactions.last)
        #expect(last.networkProtocolName == "HTTP/1.1")
        #expect(last.responseBodyBytesReceived == 5)
        #expect(last.remotePort == origin.port)
        #expect(last.totalSeconds > 0)
        #expect(last.firstByteSeconds <= last.totalSeconds)
        #expect(last.isReusedConnection)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}

@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct ConnectivityTests {
    final class WaitingDelegate: SessionDelegate {
        let waited: AsyncStream<Void>
        private let signal: AsyncStream<Void>.Continuation
        init() { (waited, signal) = AsyncStream.makeStream(of: Void.self) }
        func urlSession(_ session: Session, taskIsWaitingForConnectivity task: SessionTask) { signal.yield() }
    }

    @Test("S3: with waitsForConnectivity a task waits for an unreachable host and completes once it is up")
    func waitsForConnectivity() async throws {
        let first = try await TestOrigin.start()
        let port = first.port
        try await first.shutdown()
        let delegate = WaitingDelegate()
        let configuration = SessionConfiguration.ephemeral
        configuration.waitsForConnectivity = true
        let session = Session(configuration: configuration, delegate: delegate)
        let loading = Task { try await session.data(from: URL(string: "http://127.0.0.1:\(port)/late")!) }
        var iterator = delegate.waited.makeAsyncIterator()
        await iterator.next()
        // The route is in place before the waiting task can connect.
        let origin = try await TestOrigin.start(port: port, routes: ["/late": ScriptedResponse(body: "reached")])
        let (data, _) = try await loading.value
        #expect(data == Data("reached".utf8))
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
