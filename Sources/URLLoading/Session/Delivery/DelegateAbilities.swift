import Synchronization

/// Session delegate methods a task may call at its start and end, whose
/// absence the session learns: a delegate that lacks them then costs a
/// task nothing (no hop to its context, no metrics built for nobody).
///
/// Only methods whose answer to "implemented?" never changes for a given
/// delegate belong here: the session manager's overridable methods (which
/// report themselves unhandled while no closure is set) do not.
enum DelegateMethod: Int, CaseIterable {
    case didCreateTask
    case didFinishCollectingMetrics
    case didCompleteWithError
}

/// What the session's delegate is known to implement or lack, learned at
/// the first call of each method (a default implementation of
/// `SessionDelegate` reports itself through `DelegateFallback`), as Apple's
/// session asks `respondsToSelector:` once. Per method, a "known" and a
/// "lacking" bit in one word.
final class DelegateAbilities: Sendable {
    private let word = Atomic<UInt32>(0)
    private static let lackingShift: UInt32 = 16

    init() {}

    /// True when the delegate is known not to implement `method`.
    func lacks(_ method: DelegateMethod) -> Bool {
        word.load(ordering: .acquiring) & (1 << (UInt32(method.rawValue) + Self.lackingShift)) != 0
    }

    /// True when a call to `method` already taught whether it is implemented.
    func knows(_ method: DelegateMethod) -> Bool {
        word.load(ordering: .acquiring) & (1 << UInt32(method.rawValue)) != 0
    }

    /// Records what a call saw.
    func learn(_ method: DelegateMethod, implemented: Bool) {
        var bits: UInt32 = 1 << UInt32(method.rawValue)
        if !implemented { bits |= 1 << (UInt32(method.rawValue) + Self.lackingShift) }
        word.bitwiseOr(bits, ordering: .acquiringAndReleasing)
    }

    /// Calls `method` on `delegate` unless it is known to lack it; the first
    /// call teaches whether it does.
    func call(_ method: DelegateMethod, _ call: () -> Void) {
        if knows(method) {
            if !lacks(method) { call() }
            return
        }
        let probe = DelegateFallback.Probe()
        DelegateFallback.$probe.withValue(probe) { call() }
        learn(method, implemented: !probe.unhandled)
    }
}
