import Locking

/// Holds a scripted response's body at a `.waitFor` part until the test
/// opens it: a transfer is then certainly mid-body while the test acts.
public final class OriginGate: Sendable {
    private let state = Lock<(open: Bool, waiting: [@Sendable () -> Void])>((false, []))

    public init() {}

    /// Lets every response held at this gate go on, and any that reach it later.
    public func open() {
        let waiting = state.withLock { state -> [@Sendable () -> Void] in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        waiting.forEach { $0() }
    }

    /// Runs `action` once the gate is open (at once when it is).
    func whenOpen(_ action: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.open { return true }
            state.waiting.append(action)
            return false
        }
        if now { action() }
    }
}
