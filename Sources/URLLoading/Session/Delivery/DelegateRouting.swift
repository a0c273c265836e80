import Locking
import Synchronization

/// How the session learns that a delegate does not implement a method:
/// every default implementation of `SessionDelegate` reports itself here.
/// A task's own delegate is asked first; when its answer came from a
/// default, the session delegate is asked (as Apple's per-task delegates
/// fall back method by method).
public enum DelegateFallback {
    /// Set by the session around a call to a task's own delegate.
    final class Probe: Sendable {
        private let flag = Atomic<Bool>(false)
        var unhandled: Bool { flag.load(ordering: .relaxed) }
        func mark() { flag.store(true, ordering: .relaxed) }
    }

    @TaskLocal static var probe: Probe?

    /// Called by `SessionDelegate`'s default implementations; the session's
    /// own bookkeeping. Do not call it from a delegate.
    public static func unhandled() {
        probe?.mark()
    }
}

extension SessionTask {
    /// The task's own delegate and the session's, read together.
    var delegates: (task: (any SessionDelegate)?, session: (any SessionDelegate)?) {
        locked.withLock { ($0.delegate, $0.session?.delegate) }
    }

    /// Whether any delegate may hear of this task.
    var hasDelegate: Bool {
        let (task, session) = delegates
        return task != nil || session != nil
    }

    /// As `callDelegate`, and whether a delegate implemented the method.
    func callDelegateIfImplemented(_ call: (any SessionDelegate) -> Void) -> Bool {
        let (taskDelegate, sessionDelegate) = delegates
        for delegate in [taskDelegate, sessionDelegate] {
            guard let delegate else { continue }
            let probe = DelegateFallback.Probe()
            DelegateFallback.$probe.withValue(probe) { call(delegate) }
            if !probe.unhandled { return true }
        }
        return false
    }

    /// Calls a delegate method: the task's delegate, and the session's when
    /// the task's has no implementation of its own (or there is none).
    func callDelegate(_ call: (any SessionDelegate) -> Void) {
        let (taskDelegate, sessionDelegate) = delegates
        if let taskDelegate {
            let probe = DelegateFallback.Probe()
            DelegateFallback.$probe.withValue(probe) { call(taskDelegate) }
            guard probe.unhandled else { return }
        }
        if let sessionDelegate { call(sessionDelegate) }
    }

    /// Calls a method whose absence the session learns: as `callDelegate`,
    /// but the session's delegate is not called when it is known to lack
    /// `method`, and its first call teaches whether it does.
    func callDelegate(_ method: DelegateMethod, _ call: (any SessionDelegate) -> Void) {
        let (taskDelegate, sessionDelegate, abilities) = locked.withLock { ($0.delegate, $0.session?.delegate, $0.session?.delegateAbilities) }
        callDelegate(method, taskDelegate: taskDelegate, sessionDelegate: sessionDelegate, abilities: abilities, call)
    }

    /// As `callDelegate(_:_:)`, with the delegates the caller read.
    func callDelegate(
        _ method: DelegateMethod, taskDelegate: (any SessionDelegate)?, sessionDelegate: (any SessionDelegate)?,
        abilities: DelegateAbilities?, _ call: (any SessionDelegate) -> Void
    ) {
        if let taskDelegate {
            let probe = DelegateFallback.Probe()
            DelegateFallback.$probe.withValue(probe) { call(taskDelegate) }
            guard probe.unhandled else { return }
        }
        guard let sessionDelegate else { return }
        guard let abilities else { return call(sessionDelegate) }
        abilities.call(method) { call(sessionDelegate) }
    }

    /// Calls a delegate method with an answer: the task delegate's when it
    /// implements the method, else the session delegate's; nil when neither
    /// delegate exists.
    func askDelegate<Answer>(_ call: (any SessionDelegate) async -> Answer) async -> Answer? {
        let (taskDelegate, sessionDelegate) = delegates
        if let taskDelegate {
            let (answer, implemented) = await Self.probing(taskDelegate, call)
            guard !implemented, let sessionDelegate else { return answer }
            return await call(sessionDelegate)
        }
        guard let sessionDelegate else { return nil }
        return await call(sessionDelegate)
    }

    /// Calls a delegate method with an answer; nil when the answer came
    /// from a default implementation (the delegate does not have the method).
    func askIfImplemented<Answer>(
        _ delegate: any SessionDelegate, _ call: (any SessionDelegate) async -> Answer
    ) async -> Answer? {
        let (answer, implemented) = await Self.probing(delegate, call)
        return implemented ? answer : nil
    }

    /// The answer of the first delegate (the task's, then the session's)
    /// that implements the method; nil when neither does.
    func askFirstImplemented<Answer>(_ call: (any SessionDelegate) async -> Answer) async -> Answer? {
        let (taskDelegate, sessionDelegate) = delegates
        for delegate in [taskDelegate, sessionDelegate] {
            guard let delegate else { continue }
            let (answer, implemented) = await Self.probing(delegate, call)
            if implemented { return answer }
        }
        return nil
    }

    /// The answer, and whether the delegate's own method gave it.
    private static func probing<Answer>(
        _ delegate: any SessionDelegate, _ call: (any SessionDelegate) async -> Answer
    ) async -> (Answer, implemented: Bool) {
        let probe = DelegateFallback.Probe()
        let answer = await DelegateFallback.$probe.withValue(probe) { await call(delegate) }
        return (answer, !probe.unhandled)
    }
}
