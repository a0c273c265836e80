import Foundation
import Synchronization
import Testing
@testable import Transport

/// The loop's back-off from spins that caught nothing (`SpinPolicy`).
@Suite struct SpinPolicyTests {
    /// The turns, out of `turns`, on which the policy spins for `wait` when every spin misses.
    static func spinningTurns(_ policy: inout SpinPolicy, _ wait: SpinPolicy.Wait, turns: Int) -> [Int] {
        var spun: [Int] = []
        for turn in 0..<turns where policy.shouldSpin(for: wait) {
            spun.append(turn)
            policy.spun(for: wait, caughtWork: false)
        }
        return spun
    }

    @Test("Misses in a row skip 1, 2, 4 … spins, at most 64; a caught one spins every turn again")
    func backsOffAndRecovers() {
        var policy = SpinPolicy()
        // Spins at 0, skips 1, spins at 2, skips 2, spins at 5, skips 4, at 10, skips 8, at 19 …
        let first = Self.spinningTurns(&policy, .command, turns: 40)
        #expect(first == [0, 2, 5, 10, 19, 36])
        // The back-off stops growing at the maximum: two spins 65 turns apart.
        var capped = SpinPolicy()
        let turns = Self.spinningTurns(&capped, .command, turns: 600)
        let gaps = zip(turns.dropFirst(), turns).map { $0 - $1 }
        #expect(gaps.suffix(3) == [SpinPolicy.maximumSkips + 1, SpinPolicy.maximumSkips + 1, SpinPolicy.maximumSkips + 1])
        // A spin that catches work: every turn spins again, and the next miss starts from one skip.
        while !capped.shouldSpin(for: .command) {}
        capped.spun(for: .command, caughtWork: true)
        var spins = 0
        for _ in 0..<5 where capped.shouldSpin(for: .command) { spins += 1 }
        #expect(spins == 5)
        capped.spun(for: .command, caughtWork: false)
        let after = Self.spinningTurns(&capped, .command, turns: 6)
        #expect(after == [1, 4])
    }

    @Test("Waiting for a command and for a socket back off apart")
    func kindsApart() {
        var policy = SpinPolicy()
        _ = Self.spinningTurns(&policy, .command, turns: 20)
        let commandSpins = policy.shouldSpin(for: .command)
        let socketSpins = policy.shouldSpin(for: .socket)
        #expect(!commandSpins && socketSpins)
        policy.spun(for: .socket, caughtWork: true)
        let socketSpinsAgain = policy.shouldSpin(for: .socket)
        #expect(socketSpinsAgain)
    }
}

/// The cap on loops spinning at once (`CurlMulti`'s doc comment).
@Suite struct SpinSlotsTests {
    @Test func slotsUpToTheLimit() {
        let slots = SpinSlots(limit: 2)
        #expect(slots.take())
        #expect(slots.take())
        #expect(!slots.take())
        slots.give()
        #expect(slots.take())
        #expect(!slots.take())
        // One CPU (limit 0) or a negative count: never.
        #expect(!SpinSlots(limit: 0).take())
        #expect(!SpinSlots(limit: -1).take())
    }

    @Test("With a cap of one, eight real threads never hold a slot at once")
    func neverMoreHoldersThanTheLimitAcrossThreads() async {
        final class Seen: Sendable {
            let holders = Atomic<Int>(0)
            let most = Atomic<Int>(0)
            let taken = Atomic<Int>(0)
        }
        // Real threads, not Swift tasks: a pool as wide as the CPUs would
        // run two at a time and could not show a cap above two broken.
        let slots = SpinSlots(limit: 1)
        let seen = Seen()
        let group = DispatchGroup()
        for _ in 0..<8 {
            group.enter()
            let thread = Thread {
                for _ in 0..<20_000 where slots.take() {
                    let now = seen.holders.add(1, ordering: .sequentiallyConsistent).newValue
                    seen.most.max(now, ordering: .relaxed)
                    seen.taken.add(1, ordering: .relaxed)
                    // Hold the slot a little, so an overlap would be seen.
                    for _ in 0..<50 { _ = seen.holders.load(ordering: .relaxed) }
                    seen.holders.subtract(1, ordering: .sequentiallyConsistent)
                    slots.give()
                }
                group.leave()
            }
            thread.start()
        }
        await withCheckedContinuation { continuation in group.notify(queue: .global()) { continuation.resume() } }
        #expect(seen.most.load(ordering: .relaxed) == 1)
        #expect(seen.taken.load(ordering: .relaxed) > 0)
        // The slot came back.
        #expect(slots.take() && !slots.take())
    }
}
