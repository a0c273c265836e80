import CoreMetrics
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import InMemoryTracing
import Synchronization
import Testing
import TestSupport
import Tracing
@testable import URLLoading

/// The transport's thread moves the bytes of every transfer of the
/// process: it carries its name where the system shows threads, and runs
/// none of the application's code — a tracer and a metrics backend hear a
/// task's end where its delegate would.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct TransportThreadTests {
    @Test("The transport's thread has its name where top, perf and gdb read it")
    func named() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/a", response: ScriptedResponse(body: "a"))
        let session = Session(configuration: .ephemeral)
        _ = try await session.data(from: origin.url("/a"))
        let directory = "/proc/self/task"
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).compactMap {
            try? String(contentsOfFile: "\(directory)/\($0)/comm", encoding: .utf8).trimmingCharacters(in: .newlines)
        }
        #expect(names.contains { $0.hasPrefix("urlloading.curl") }, "threads: \(Set(names))")
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A task's span ends, its context goes into each request, and the metrics backend hears its end, off the transport's thread")
    func observersOffTheTransportThread() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/a", response: ScriptedResponse(body: "a"))
        origin.route("/missing", response: ScriptedResponse(status: 404, body: "no"))
        origin.route("/moved", Routes.redirect(to: "/a", status: 302))
        let tracer = ThreadNotingTracer()
        let backend = ThreadNotingMetrics()
        let session = withMetricsFactory(backend) { withTracer(tracer) { Session(configuration: .ephemeral) } }
        #expect(session.tracer != nil)
        #expect(session.meters != nil)

        // Through the async API (its end runs on the awaiting task) and a
        // completion handler (its end comes from the transport).
        var returned: [UInt64] = []
        for (index, path) in ["/a", "/missing", "/moved", "/a", "/missing", "/moved"].enumerated() {
            let data: Data?
            if index < 3 {
                data = try await session.data(from: origin.url(path)).0
            } else {
                data = await withCheckedContinuation { (done: CheckedContinuation<Data?, Never>) in
                    session.dataTask(with: URLRequest(url: origin.url(path))) { data, _, _ in done.resume(returning: data) }.resume()
                }
            }
            returned.append(DefaultTracerClock.now.nanosecondsSinceEpoch)
            #expect(data?.isEmpty == false)
        }
        // The span ends before its caller has the data: no waiting here.
        let ends = tracer.ends.withLock { $0 }
        #expect(ends.count == 6)
        for (end, back) in zip(ends, returned) {
            #expect(end.instant <= back, "a span ended after its task's caller had the answer")
        }
        let spanThreads = ends.map(\.thread)
        #expect(!spanThreads.contains { $0.hasPrefix("urlloading.curl") }, "span ends on \(spanThreads)")
        let injections = tracer.injections.withLock { $0 }
        #expect(injections.count == 8, "each request carries the span's context")
        #expect(!injections.contains { $0.hasPrefix("urlloading.curl") }, "contexts injected on \(injections)")
        let meterThreads = backend.threads.withLock { $0 }
        #expect(!meterThreads.isEmpty, "the backend heard nothing")
        #expect(!meterThreads.contains { $0.hasPrefix("urlloading.curl") }, "metrics recorded on \(Set(meterThreads))")
        #expect(tracer.memory.finishedSpans.map { $0.attributes["http.response.status_code"]?.toSpanAttribute() } == [200, 404, 200, 200, 404, 200])
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A task that waits for connectivity notes each try in its span off the transport's thread, before the span ends")
    func retryEventOffTheTransportThread() async throws {
        // Refused until the origin listens; no parallel test's server can take the port meanwhile.
        let reserved = try ReservedPort()
        let tracer = ThreadNotingTracer()
        let configuration = SessionConfiguration.ephemeral
        configuration.waitsForConnectivity = true
        let session = withTracer(tracer) { Session(configuration: configuration) }
        let url = try #require(URL(string: "http://127.0.0.1:\(reserved.port)/late"))
        let loaded = AsyncStream<Data?>.makeStream()
        session.dataTask(with: URLRequest(url: url)) { data, _, _ in
            loaded.continuation.yield(data)
            loaded.continuation.finish()
        }.resume()
        #expect(await eventually { tracer.events.withLock { $0.contains { $0.name == "retry" } } })
        let origin = try await TestOrigin.start(adopting: reserved, routes: ["/late": ScriptedResponse(body: "reached")])
        var results = loaded.stream.makeAsyncIterator()
        let data = await results.next()
        #expect(data == Data("reached".utf8))
        let events = tracer.events.withLock { $0 }
        #expect(!events.isEmpty)
        #expect(!events.contains { $0.thread.hasPrefix("urlloading.curl") }, "events added on \(events.map(\.thread))")
        let span = try #require(tracer.memory.finishedSpans.first)
        #expect(span.events.map(\.name).first == "retry", "the span ended without its retry: \(span.events.map(\.name))")
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}

/// The calling thread's name, as the system keeps it (at most 15 bytes).
private func currentThreadName() -> String {
    let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "unknown"
    return name.trimmingCharacters(in: .newlines)
}

/// swift-distributed-tracing's in-memory tracer (W3C propagation), noting
/// the thread and the instant each span ends at.
private final class ThreadNotingTracer: Tracer, Sendable {
    private let inner = TestW3CTracer()
    let ends = Mutex<[(thread: String, instant: UInt64)]>([])
    let injections = Mutex<[String]>([])
    let events = Mutex<[(thread: String, name: String)]>([])
    var memory: InMemoryTracer { inner.memory }

    func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind, at instant: @autoclosure () -> Instant,
        function: String, file fileID: String, line: UInt
    ) -> NotingSpan {
        NotingSpan(
            inner: inner.startSpan(operationName, context: context(), ofKind: kind, at: instant(), function: function, file: fileID, line: line),
            tracer: self)
    }

    func activeSpan(identifiedBy context: ServiceContext) -> NotingSpan? { nil }

    func forceFlush() {}

    func inject<Carrier, Inject: Injector>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject.Carrier == Carrier {
        let name = currentThreadName()
        injections.withLock { $0.append(name) }
        inner.inject(context, into: &carrier, using: injector)
    }

    func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract)
    where Extract.Carrier == Carrier {}

    struct NotingSpan: Tracing.Span {
        let inner: InMemorySpan
        let tracer: ThreadNotingTracer

        var context: ServiceContext { inner.context }
        var operationName: String {
            get { inner.operationName }
            nonmutating set { inner.operationName = newValue }
        }
        var attributes: SpanAttributes {
            get { inner.attributes }
            nonmutating set { inner.attributes = newValue }
        }
        var isRecording: Bool { inner.isRecording }
        func setStatus(_ status: SpanStatus) { inner.setStatus(status) }
        func addEvent(_ event: SpanEvent) {
            tracer.events.withLock { $0.append((thread: currentThreadName(), name: event.name)) }
            inner.addEvent(event)
        }
        func recordError<Instant: TracerInstant>(_ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant) {
            inner.recordError(error, attributes: attributes, at: instant())
        }
        func addLink(_ link: SpanLink) { inner.addLink(link) }
        func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
            let at = instant()
            tracer.ends.withLock { $0.append((thread: currentThreadName(), instant: at.nanosecondsSinceEpoch)) }
            inner.end(at: at)
        }
    }
}

/// A metrics backend noting the thread of each value it is handed.
private final class ThreadNotingMetrics: MetricsFactory, Sendable {
    let threads = Mutex<[String]>([])

    private final class Handler: CounterHandler, FloatingPointCounterHandler, RecorderHandler, TimerHandler, Sendable {
        let owner: ThreadNotingMetrics
        init(owner: ThreadNotingMetrics) { self.owner = owner }
        private func note() {
            let name = currentThreadName()
            owner.threads.withLock { $0.append(name) }
        }
        func increment(by amount: Int64) { note() }
        func increment(by amount: Double) { note() }
        func reset() {}
        func record(_ value: Int64) { note() }
        func record(_ value: Double) { note() }
        func recordNanoseconds(_ duration: Int64) { note() }
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { Handler(owner: self) }
    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler { Handler(owner: self) }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler { Handler(owner: self) }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { Handler(owner: self) }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
}
