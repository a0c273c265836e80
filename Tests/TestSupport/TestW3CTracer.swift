public import InMemoryTracing
public import Tracing

/// swift-distributed-tracing's in-memory tracer, its context propagated as
/// W3C Trace Context's `traceparent` (as swift-otel's propagator writes it).
public struct TestW3CTracer: Tracer {
    /// The spans, as swift-distributed-tracing's in-memory tracer keeps them.
    public let memory = InMemoryTracer(
        idGenerator: InMemoryTracer.IDGenerator(
            nextTraceID: { String((0..<32).map { _ in "0123456789abcdef".randomElement() ?? "0" }) },
            nextSpanID: { String((0..<16).map { _ in "0123456789abcdef".randomElement() ?? "0" }) }))

    public init() {}

    public func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind, at instant: @autoclosure () -> Instant,
        function: String, file fileID: String, line: UInt
    ) -> InMemorySpan {
        // An attribute of the tracer's own, which the task's must not replace.
        let span = memory.startSpan(operationName, context: context(), ofKind: kind, at: instant(), function: function, file: fileID, line: line)
        span.attributes["tracer.sampled"] = true
        return span
    }

    public func activeSpan(identifiedBy context: ServiceContext) -> InMemorySpan? {
        memory.activeSpan(identifiedBy: context)
    }

    public func forceFlush() { memory.forceFlush() }

    public func inject<Carrier, Inject: Injector>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject.Carrier == Carrier {
        guard let span = context.inMemorySpanContext else { return }
        injector.inject("00-\(span.traceID)-\(span.spanID)-01", forKey: "traceparent", into: &carrier)
    }

    public func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract)
    where Extract.Carrier == Carrier {}
}
