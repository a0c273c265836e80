import Synchronization

/// Whether the transport loop spins before it sleeps (see `CurlMulti`): a
/// spin that ends without work cost its whole budget in CPU time for
/// nothing, so after one the loop skips the next spin of the same kind —
/// waiting for a command with no transfer running, or for a socket with
/// transfers running — then twice as many after each further miss, up to
/// `maximumSkips`; a spin that catches work ends the back-off. The two kinds
/// differ: a loopback server's answer comes within the budget, a caller's
/// next request often does not. Runs on the loop thread only.
package struct SpinPolicy: Sendable {
    /// What a spin waits for.
    package enum Wait: Sendable {
        /// A command, with no transfer running.
        case command
        /// A ready socket, with transfers running.
        case socket
    }

    /// The most spins of one kind skipped after misses in a row.
    package static let maximumSkips = 64

    private struct BackOff: Sendable {
        /// Spins to skip before the next one.
        var skips = 0
        /// How many the last miss set.
        var length = 0
    }

    private var command = BackOff()
    private var socket = BackOff()

    package init() {}

    /// Whether the loop spins now for `wait`; a turn that does not counts
    /// down the back-off.
    package mutating func shouldSpin(for wait: Wait) -> Bool {
        Self.shouldSpin(&self[wait])
    }

    /// Records how a spin for `wait` ended.
    package mutating func spun(for wait: Wait, caughtWork: Bool) {
        if caughtWork {
            self[wait] = BackOff()
        } else {
            let length = min(max(1, self[wait].length * 2), Self.maximumSkips)
            self[wait] = BackOff(skips: length, length: length)
        }
    }

    private static func shouldSpin(_ backOff: inout BackOff) -> Bool {
        guard backOff.skips > 0 else { return true }
        backOff.skips -= 1
        return false
    }

    private subscript(wait: Wait) -> BackOff {
        get { wait == .command ? command : socket }
        set {
            if wait == .command { command = newValue } else { socket = newValue }
        }
    }
}

/// A bounded count of holders (the loops spinning at one time), taken and
/// given back without a lock.
package final class SpinSlots: Sendable {
    private let taken = Atomic<Int>(0)
    /// How many may hold a slot at once (0: none ever).
    package let limit: Int

    package init(limit: Int) {
        self.limit = max(0, limit)
    }

    /// Takes a slot; false when all are taken.
    package func take() -> Bool {
        var current = taken.load(ordering: .relaxed)
        while current < limit {
            let (exchanged, seen) = taken.compareExchange(expected: current, desired: current + 1, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = seen
        }
        return false
    }

    /// Gives back a slot `take` returned.
    package func give() {
        taken.subtract(1, ordering: .releasing)
    }
}
