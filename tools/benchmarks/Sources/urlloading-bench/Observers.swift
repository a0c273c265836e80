import CoreMetrics
import Foundation
import Synchronization
import Tracing

// What `observed-get` bootstraps in the process: a tracer and a metrics
// backend that do what an exporter's in-process part does (spans with
// their attributes and events, W3C `traceparent` injected; counters and
// timers aggregated) and export nothing, so that the figures are the
// clients' cost of being observed, not a collector's.

/// The bootstrapped tracer: ids from a counter, spans kept until they end.
final class BenchTracer: Tracer {
    private let nextID = Atomic<UInt64>(1)
    let ended = Atomic<Int>(0)

    func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind, at instant: @autoclosure () -> Instant,
        function: String, file fileID: String, line: UInt
    ) -> BenchSpan {
        var context = context()
        let spanID = nextID.add(1, ordering: .relaxed).newValue
        let traceID = context[BenchSpanKey.self]?.traceID ?? spanID
        context[BenchSpanKey.self] = BenchSpanKey.Value(traceID: traceID, spanID: spanID)
        return BenchSpan(operationName: operationName, context: context, tracer: self)
    }

    func activeSpan(identifiedBy context: ServiceContext) -> BenchSpan? { nil }

    func forceFlush() {}

    func inject<Carrier, Inject: Injector>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject.Carrier == Carrier {
        guard let ids = context[BenchSpanKey.self] else { return }
        // W3C `traceparent`, written into one buffer as a propagator would.
        var value = "00-"
        value.reserveCapacity(55)
        func hex(_ number: UInt64, digits: Int) {
            for shift in stride(from: (digits - 1) * 4, through: 0, by: -4) {
                let digit = UInt8((number >> UInt64(shift)) & 0xf)
                value.unicodeScalars.append(Unicode.Scalar(digit < 10 ? 0x30 + digit : 0x57 + digit))
            }
        }
        hex(0, digits: 16)
        hex(ids.traceID, digits: 16)
        value += "-"
        hex(ids.spanID, digits: 16)
        value += "-01"
        injector.inject(value, forKey: "traceparent", into: &carrier)
    }

    func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract)
    where Extract.Carrier == Carrier {}
}

enum BenchSpanKey: ServiceContextKey {
    struct Value: Sendable {
        let traceID: UInt64
        let spanID: UInt64
    }
}

final class BenchSpan: Span {
    private struct State {
        var operationName: String
        var attributes = SpanAttributes()
        var events: [SpanEvent] = []
        var status: SpanStatus?
    }
    let context: ServiceContext
    private let state: Mutex<State>
    private let tracer: BenchTracer

    init(operationName: String, context: ServiceContext, tracer: BenchTracer) {
        self.context = context
        self.tracer = tracer
        state = Mutex(State(operationName: operationName))
    }

    var operationName: String {
        get { state.withLock { $0.operationName } }
        set { state.withLock { $0.operationName = newValue } }
    }
    var attributes: SpanAttributes {
        get { state.withLock { $0.attributes } }
        set { state.withLock { $0.attributes = newValue } }
    }
    var isRecording: Bool { true }
    func setStatus(_ status: SpanStatus) { state.withLock { $0.status = status } }
    func addEvent(_ event: SpanEvent) { state.withLock { $0.events.append(event) } }
    func recordError<Instant: TracerInstant>(_ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant) {
        addEvent(SpanEvent(name: "exception", at: instant(), attributes: attributes))
    }
    func addLink(_ link: SpanLink) {}
    func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        _ = instant()
        tracer.ended.add(1, ordering: .relaxed)
    }
}

/// The bootstrapped metrics backend: each counter, timer and recorder aggregates in place.
final class BenchMetrics: MetricsFactory {
    private final class Handler: CounterHandler, FloatingPointCounterHandler, RecorderHandler, TimerHandler, Sendable {
        private let total = Atomic<Int64>(0)
        private let count = Atomic<Int64>(0)
        func increment(by amount: Int64) { total.add(amount, ordering: .relaxed) }
        func increment(by amount: Double) { total.add(Int64(amount), ordering: .relaxed) }
        func reset() { total.store(0, ordering: .relaxed) }
        func record(_ value: Int64) { record(Double(value)) }
        func record(_ value: Double) {
            count.add(1, ordering: .relaxed)
            total.add(Int64(value), ordering: .relaxed)
        }
        func recordNanoseconds(_ duration: Int64) { record(duration) }
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { Handler() }
    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler { Handler() }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler { Handler() }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { Handler() }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
}

/// Installs the tracer and the metrics backend for the whole process
/// (once); `BENCH_OBSERVE=tracer` or `=metrics` installs only that one.
func bootstrapObservers() {
    let only = ProcessInfo.processInfo.environment["BENCH_OBSERVE"]
    if only != "metrics" { InstrumentationSystem.bootstrap(BenchTracer()) }
    if only != "tracer" { MetricsSystem.bootstrap(BenchMetrics()) }
}
