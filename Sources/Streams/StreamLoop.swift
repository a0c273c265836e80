import CEventPoll
import Foundation
import Locking
#if canImport(Glibc)
import Glibc
#endif

/// One thread that runs many stream connections: their sockets in one
/// epoll set, an eventfd the owners' threads signal when they queue an
/// operation, and the connections' deadlines in a heap. A process has a
/// few of these (`StreamLoop.next()`), whatever its number of connections.
///
/// Each connection is serviced on its loop only, one at a time, so its
/// operations keep their order; a connection nobody reads from is not
/// polled for input, so a slow consumer holds back its own socket only.
/// Everything but `inbox` is touched by the loop's thread only.
final class StreamLoop: @unchecked Sendable {
    /// How many loops the process runs: one per two cores, one to four.
    static let count = min(4, max(1, ProcessInfo.processInfo.activeProcessorCount / 2))
    private static let loops = Lock<[StreamLoop]>([])
    private static let turn = Lock(0)

    /// The loop for a new connection: the loops in turn, each started on
    /// first use; nil when one cannot start (no descriptor left for its
    /// epoll set or eventfd).
    static func next() -> StreamLoop? {
        let index = turn.withLock { turn in
            defer { turn = (turn + 1) % count }
            return turn
        }
        return loops.withLock { loops -> StreamLoop? in
            while loops.count <= index {
                guard let loop = StreamLoop() else { return nil }
                loops.append(loop)
            }
            return loops[index]
        }
    }

    private struct Inbox {
        var adopted: [StreamWorker] = []
        var ready: [UInt64] = []
        /// The eventfd was written and the loop has not taken the inbox since.
        var signalled = false
        var lastIdentifier: UInt64 = 0
    }

    private let inbox = Lock(Inbox())
    private let poller: Int32
    private let wake: Int32
    /// The loop's connections by identifier (0 is the eventfd's).
    private var workers: [UInt64: StreamWorker] = [:]
    private var timers = DeadlineHeap()
    /// Where every connection of the loop reads before its bytes join its buffer.
    private let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
    /// Marks a connection serviced in the current turn (one service per turn).
    private var turnNumber: UInt64 = 0

    private init?() {
        poller = epoll_create1(Int32(EPOLL_CLOEXEC))
        wake = eventfd(0, Int32(EFD_CLOEXEC) | Int32(EFD_NONBLOCK))
        guard poller >= 0, wake >= 0, cevent_poll_control(poller, EPOLL_CTL_ADD, wake, EPOLLIN.rawValue, 0) == 0 else {
            if poller >= 0 { close(poller) }
            if wake >= 0 { close(wake) }
            scratch.deallocate()
            return nil
        }
        let thread = Thread { [self] in
            // (Linux keeps 15 bytes of a thread's name; set from the thread itself.)
            Thread.current.name = "URLStreamLoop"
            run()
        }
        thread.start()
    }

    /// A new connection's identifier on this loop.
    func makeIdentifier() -> UInt64 {
        inbox.withLock { inbox in
            inbox.lastIdentifier += 1
            return inbox.lastIdentifier
        }
    }

    /// A connected worker joins the loop, which services it at once.
    func adopt(_ worker: StreamWorker) {
        signal { $0.adopted.append(worker) }
    }

    /// The connection `identifier` has something new (an operation, a
    /// cancel): the loop services it in its next turn.
    func ready(_ identifier: UInt64) {
        signal { $0.ready.append(identifier) }
    }

    private func signal(_ change: (inout Inbox) -> Void) {
        let wakeUp = inbox.withLock { inbox -> Bool in
            change(&inbox)
            defer { inbox.signalled = true }
            return !inbox.signalled
        }
        guard wakeUp else { return }
        var one: UInt64 = 1
        _ = write(wake, &one, 8)
    }

    // MARK: The loop's thread

    private func run() {
        var data = [UInt64](repeating: 0, count: Int(cevent_poll_batch))
        var events = [UInt32](repeating: 0, count: Int(cevent_poll_batch))
        var due: [StreamWorker] = []
        while true {
            let timeout = timers.earliest.map { StreamSocket.milliseconds(ContinuousClock.now.duration(to: $0)) } ?? -1
            let count = cevent_poll_wait(poller, &data, &events, timeout)
            for index in 0..<max(0, Int(count)) {
                if data[index] == 0 {
                    var value: UInt64 = 0
                    _ = read(wake, &value, 8)
                } else if let worker = workers[data[index]] {
                    due.append(worker)
                }
            }
            let (adopted, ready) = inbox.withLock { inbox in
                defer {
                    inbox.adopted = []
                    inbox.ready = []
                    inbox.signalled = false
                }
                return (inbox.adopted, inbox.ready)
            }
            for worker in adopted {
                workers[worker.identifier] = worker
                worker.scratch = scratch
                due.append(worker)
            }
            for identifier in ready { if let worker = workers[identifier] { due.append(worker) } }
            let now = ContinuousClock.now
            while let (deadline, identifier) = timers.popDue(now) {
                if let worker = workers[identifier], worker.scheduledDeadline == deadline {
                    worker.scheduledDeadline = nil
                    due.append(worker)
                }
            }
            turnNumber &+= 1
            for worker in due where worker.lastTurn != turnNumber {
                worker.lastTurn = turnNumber
                service(worker, now: now)
            }
            due.removeAll(keepingCapacity: due.count <= 4096)
        }
    }

    /// Runs what the connection can do now, then polls its socket for
    /// what it waits on and schedules its next deadline.
    private func service(_ worker: StreamWorker, now: ContinuousClock.Instant) {
        worker.service(now: now)
        let retired = worker.takeRetired()
        if !retired.isEmpty {
            // An opening's failed sockets: out of the set before they close.
            for descriptor in retired {
                if worker.registered != 0 { _ = cevent_poll_control(poller, EPOLL_CTL_DEL, descriptor, 0, 0) }
                close(descriptor)
            }
            worker.registered = 0
        }
        if worker.finished {
            workers[worker.identifier] = nil
            // Out of the set before the number can be reused.
            if worker.registered != 0 { _ = cevent_poll_control(poller, EPOLL_CTL_DEL, worker.descriptor, 0, 0) }
            worker.closeDescriptor()
            return
        }
        let wanted = (worker.wantsRead ? EPOLLIN.rawValue : 0) | (worker.wantsWrite ? EPOLLOUT.rawValue : 0)
        if wanted != worker.registered {
            let operation = worker.registered == 0 ? EPOLL_CTL_ADD : wanted == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD
            if cevent_poll_control(poller, operation, worker.descriptor, wanted, worker.identifier) == 0 || operation == EPOLL_CTL_DEL {
                worker.registered = wanted
            } else {
                worker.cancel(StreamError(.io, "the connection could not be polled: \(String(cString: strerror(errno)))"))
                ready(worker.identifier)
            }
        }
        if let deadline = worker.nextDeadline() {
            if worker.scheduledDeadline != deadline {
                worker.scheduledDeadline = deadline
                timers.push(deadline, worker.identifier)
            }
        } else {
            worker.scheduledDeadline = nil
        }
    }
}

/// Deadlines in a binary min-heap. An entry whose connection has moved its
/// deadline since stays until it comes up, and is then skipped.
struct DeadlineHeap {
    private var entries: [(deadline: ContinuousClock.Instant, identifier: UInt64)] = []

    var earliest: ContinuousClock.Instant? { entries.first?.deadline }

    mutating func push(_ deadline: ContinuousClock.Instant, _ identifier: UInt64) {
        entries.append((deadline, identifier))
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].deadline < entries[parent].deadline else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    /// The earliest entry if it is due at `now`, taken out.
    mutating func popDue(_ now: ContinuousClock.Instant) -> (ContinuousClock.Instant, UInt64)? {
        guard let first = entries.first, first.deadline <= now else { return nil }
        let last = entries.removeLast()
        if !entries.isEmpty {
            entries[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1
                let right = left + 1
                var smallest = parent
                if left < entries.count, entries[left].deadline < entries[smallest].deadline { smallest = left }
                if right < entries.count, entries[right].deadline < entries[smallest].deadline { smallest = right }
                guard smallest != parent else { break }
                entries.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return first
    }
}
