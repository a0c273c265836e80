import Locking

/// A one-shot signal between a delegate and a test: `open()` once the
/// awaited event happened (a task completed, a session became invalid);
/// `wait()` returns once it is open, at once if it already is.
public final class CompletionLatch: Sendable {
    private let state = Lock<(open: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    public init() {}

    /// Marks the event as happened and wakes the waiter.
    public func open() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.open = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Whether `open()` was called.
    public var isOpen: Bool { state.withLock { $0.open } }

    /// Returns once `open()` was called.
    public func wait() async {
        await withCheckedContinuation { continuation in
            let open = state.withLock { state -> Bool in
                if !state.open { state.waiter = continuation }
                return state.open
            }
            if open { continuation.resume() }
        }
    }
}
