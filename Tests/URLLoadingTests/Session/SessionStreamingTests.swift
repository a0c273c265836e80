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
    @Test("Bytes(for:) streams a large body with back-pressure, every byte in order")
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

    @Test("A streamed body read to its end, or dropped unread, lets go of its task: nothing of a bytes(for:) call outlives it")
    func byteStreamReleasesItsTask() async throws {
        /// Holds every task the session makes, weakly.
        final class Creations: SessionDelegate {
            struct Weak: Sendable { weak var task: SessionTask? }
            let made = Lock<[Weak]>([])
            func urlSession(_ session: Session, didCreateTask task: SessionTask) {
                made.withLock { $0.append(Weak(task: task)) }
            }
            var alive: Int { made.withLock { $0.filter { $0.task != nil }.count } }
            var count: Int { made.withLock { $0.count } }
        }
        let origin = try await TestOrigin.start()
        origin.route("/small", response: ScriptedResponse(body: "small body"))
        let creations = Creations()
        let session = Session(configuration: .ephemeral, delegate: creations)
        do {
            let (bytes, _) = try await session.bytes(from: origin.url("/small"))
            var text = ""
            for try await line in bytes.lines { text += line }
            #expect(text == "small body")
        }
        do {
            // Dropped unread.
            _ = try await session.bytes(from: origin.url("/small"))
        }
        // didCreateTask runs on the delegate queue; the head may reach the caller first.
        #expect(await eventually { creations.count == 2 }, "\(creations.count) of 2 creations heard")
        #expect(await eventually { creations.alive == 0 }, "\(creations.alive) of 2 tasks still alive")
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("The request timeout counts the server's silence, not a slow reader's back-pressure")
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

    @Test("Custom trust roots from the configuration; the system's roots reject the test CA")
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

    final class MetricsDelegate: SessionDelegate {
        let collected = Lock<[TaskMetrics]>([])
        func urlSession(_ session: Session, task: SessionTask, didFinishCollecting metrics: TaskMetrics) {
            collected.withLock { $0.append(metrics) }
        }
    }

    @Test("Metrics in Apple's shape: one transaction per hop with request, response, ordered dates, byte counts, reuse, the path's members")
    func metrics() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/r", Routes.redirect(to: "/m"))
        origin.route("/m", response: ScriptedResponse(body: "12345"))
        let delegate = MetricsDelegate()
        let session = Session(configuration: .ephemeral, delegate: delegate)
        let before = Date()
        _ = try await session.data(for: URLRequest(url: origin.url("/r")), delegate: delegate)
        let metrics = try #require(delegate.collected.withLock { $0.first })
        #expect(metrics.redirectCount == 1)
        #expect(metrics.transactionMetrics.count == 2)
        #expect(metrics.transactionMetrics.map { ($0.response as? HTTPURLResponse)?.statusCode } == [302, 200])
        #expect(metrics.transactionMetrics.map { $0.request.url?.path } == ["/r", "/m"])
        #expect(metrics.transactionMetrics.allSatisfy { $0.resourceFetchType == .networkLoad })
        let first = try #require(metrics.transactionMetrics.first)
        let last = try #require(metrics.transactionMetrics.last)
        #expect(!first.isReusedConnection && last.isReusedConnection)
        // A new connection has every phase but TLS, in order; a reused one has no lookup or connect.
        let phases = [
            first.fetchStartDate, first.domainLookupStartDate, first.domainLookupEndDate, first.connectStartDate,
            first.connectEndDate, first.requestStartDate, first.requestEndDate, first.responseStartDate, first.responseEndDate,
        ]
        let dates = phases.compactMap { $0 }
        #expect(dates.count == phases.count && dates == dates.sorted(), "\(phases)")
        #expect(dates.first.map { $0 >= before.addingTimeInterval(-0.01) } == true && metrics.taskInterval.contains(dates[dates.count - 1]))
        #expect(first.secureConnectionStartDate == nil && first.negotiatedTLSProtocolVersion == nil)
        #expect(last.domainLookupStartDate == nil && last.connectStartDate == nil && last.responseStartDate != nil)
        #expect(last.networkProtocolName == "http/1.1" && !last.isProxyConnection)
        #expect(last.countOfResponseBodyBytesReceived == 5 && last.countOfResponseBodyBytesAfterDecoding == 5)
        #expect(last.countOfResponseHeaderBytesReceived > 0 && last.countOfRequestHeaderBytesSent > 0)
        #expect(last.remotePort == origin.port && last.remoteAddress == "127.0.0.1" && last.localPort != nil)
        // The device's path, which nothing here reports: as a wired server's.
        #expect(
            metrics.transactionMetrics.allSatisfy {
                !$0.isCellular && !$0.isExpensive && !$0.isConstrained && !$0.isMultipath && $0.domainResolutionProtocol == .unknown
            })
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Metrics: a redirect followed while its body is still coming (cut short) has the transport's dates and counts too")
    func cutShortRedirectMetrics() async throws {
        let origin = try await TestOrigin.start()
        let gate = OriginGate()
        origin.route(
            "/held",
            response: ScriptedResponse(
                status: 302, headers: [HeaderField("Location", "/m")], parts: [.bytes(Array("x".utf8)), .waitFor(gate)],
                framing: .declaredLength(1000)))
        origin.route("/m", response: ScriptedResponse(body: "12345"))
        let delegate = MetricsDelegate()
        let session = Session(configuration: .ephemeral, delegate: delegate)
        _ = try await session.data(for: URLRequest(url: origin.url("/held")), delegate: delegate)
        gate.open()
        let metrics = try #require(delegate.collected.withLock { $0.first })
        let first = try #require(metrics.transactionMetrics.first)
        let phases = [
            first.fetchStartDate, first.domainLookupStartDate, first.domainLookupEndDate, first.connectStartDate,
            first.connectEndDate, first.requestStartDate, first.requestEndDate, first.responseStartDate, first.responseEndDate,
        ]
        let dates = phases.compactMap { $0 }
        #expect(dates.count == phases.count && dates == dates.sorted(), "\(phases)")
        #expect((first.response as? HTTPURLResponse)?.statusCode == 302 && !first.isReusedConnection)
        #expect(first.countOfResponseHeaderBytesReceived > 0 && first.countOfRequestHeaderBytesSent > 0)
        #expect(first.remotePort == origin.port && metrics.transactionMetrics.count == 2)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Metrics: a cache hit is a local-cache transaction with its Cache-Status; a miss names it too")
    func cacheHitMetrics() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/c", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600")], body: "cached"))
        let delegate = MetricsDelegate()
        let session = Session(configuration: .ephemeral, delegate: delegate)
        for _ in 0..<2 { _ = try await session.data(for: URLRequest(url: origin.url("/c")), delegate: delegate) }
        let collected = delegate.collected.withLock { $0 }
        #expect(collected.count == 2)
        let miss = try #require(collected.first?.transactionMetrics.first)
        let hit = try #require(collected.last?.transactionMetrics.first)
        #expect(collected.last?.transactionMetrics.count == 1)
        #expect(miss.resourceFetchType == .networkLoad && miss.cacheStatus?.contains("fwd=uri-miss") == true)
        #expect(hit.resourceFetchType == .localCache && hit.cacheStatus?.contains("hit") == true)
        #expect((hit.response as? HTTPURLResponse)?.statusCode == 200 && hit.request.url == origin.url("/c"))
        #expect(hit.connectStartDate == nil && hit.remoteAddress == nil && hit.fetchStartDate != nil)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    final class ProxiedMetricsDelegate: SessionDelegate {
        let collected = Lock<[TaskMetrics]>([])
        func urlSession(
            _ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge,
            completionHandler: @escaping @Sendable (Session.AuthChallengeDisposition, Credential?) -> Void
        ) {
            completionHandler(.useCredential, Credential(user: "proxyuser", password: "pp", persistence: .forSession))
        }
        func urlSession(_ session: Session, task: SessionTask, didFinishCollecting metrics: TaskMetrics) {
            collected.withLock { $0.append(metrics) }
        }
    }

    @Test("Metrics through a proxy: every transaction says so, the 407 and the answer each with their response")
    func proxyMetrics() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/p", response: ScriptedResponse(body: "proxied"))
        let proxy = try TestProxy(user: "proxyuser", password: "pp")
        let configuration = SessionConfiguration.ephemeral
        configuration.proxyURL = proxy.url
        let delegate = ProxiedMetricsDelegate()
        let session = Session(configuration: configuration, delegate: delegate)
        _ = try await session.data(for: URLRequest(url: origin.url("/p")), delegate: delegate)
        let transactions = try #require(delegate.collected.withLock { $0.first?.transactionMetrics })
        #expect(transactions.map { ($0.response as? HTTPURLResponse)?.statusCode } == [407, 200])
        #expect(transactions.allSatisfy { $0.isProxyConnection })
        #expect(transactions.last?.remotePort == proxy.port)
        // The 407 hop was cut short by the answer: it has what the task saw.
        #expect(transactions.first.map { $0.fetchStartDate != nil && $0.responseStartDate != nil && $0.networkProtocolName == "http/1.1" } == true)
        session.finishTasksAndInvalidate()
        proxy.shutdown()
        try await origin.shutdown()
    }

    @Test("Metrics over TLS: secure connection dates and the negotiated version and cipher suite")
    func tlsMetrics() async throws {
        let certificates = try TestCertificates.shared()
        let origin = try await TestOrigin.start(tls: certificates.server)
        origin.route("/t", response: ScriptedResponse(body: "secure"))
        let configuration = SessionConfiguration.ephemeral
        configuration.trustRootsFile = certificates.caCertificatePath
        let delegate = MetricsDelegate()
        let session = Session(configuration: configuration, delegate: delegate)
        _ = try await session.data(for: URLRequest(url: origin.url("/t")), delegate: delegate)
        let transaction = try #require(delegate.collected.withLock { $0.first?.transactionMetrics.first })
        let secure = [transaction.connectStartDate, transaction.secureConnectionStartDate, transaction.secureConnectionEndDate, transaction.connectEndDate]
        #expect(secure.allSatisfy { $0 != nil } && secure.compactMap { $0 } == secure.compactMap { $0 }.sorted(), "\(secure)")
        #expect(transaction.negotiatedTLSProtocolVersion?.hasPrefix("TLSv1.") == true, "\(String(describing: transaction.negotiatedTLSProtocolVersion))")
        #expect(transaction.negotiatedTLSCipherSuite?.isEmpty == false)
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

    @Test("With waitsForConnectivity a task waits for an unreachable host and completes once it is up")
    func waitsForConnectivity() async throws {
        // Refused until the origin listens; no parallel test's server can take the port meanwhile.
        let reserved = try ReservedPort()
        let delegate = WaitingDelegate()
        let configuration = SessionConfiguration.ephemeral
        configuration.waitsForConnectivity = true
        let session = Session(configuration: configuration, delegate: delegate)
        let loading = Task { try await session.data(from: URL(string: "http://127.0.0.1:\(reserved.port)/late")!) }
        var iterator = delegate.waited.makeAsyncIterator()
        await iterator.next()
        // The route is in place before the waiting task can connect.
        let origin = try await TestOrigin.start(adopting: reserved, routes: ["/late": ScriptedResponse(body: "reached")])
        let (data, _) = try await loading.value
        #expect(data == Data("reached".utf8))
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
