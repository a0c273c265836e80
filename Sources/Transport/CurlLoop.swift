import CCurl
import Foundation
import Locking
import Synchronization

/// One transport loop: a thread running one libcurl multi handle (see
/// `CurlMulti` for a turn of the loop and why it spins). What the loop thread
/// owns: other threads touch only `shared` (behind its lock), `hasCommands`
/// (atomic), the immutable `share`, and `send`, `take`, `shutdown`,
/// `discard` (before the thread starts) and `wakeHoldingLock`, which use
/// those and `curl_multi_wakeup` (thread-safe) under the lock the loop frees
/// the multi handle under; everything else runs on the loop thread, which
/// is why the class may cross to it.
final class CurlLoop: @unchecked Sendable {
    typealias TransferID = CurlMulti.TransferID

    enum Command {
        /// A transfer configured by the thread that started it.
        case start(TransferID, HandOff, TransferRequest.Body)
        case cancel(TransferID)
        case unpause(TransferID)
        case shutdown
    }

    /// A configured transfer on its way from the thread that made it to the
    /// loop thread: owned by exactly one of them at a time.
    struct HandOff: @unchecked Sendable {
        let transfer: Transfer
    }

    /// An idle easy handle and its error buffer; only the thread that
    /// popped it from the pool uses them.
    struct IdleHandle: @unchecked Sendable {
        let pointer: UnsafeMutableRawPointer
        let errorBuffer: ErrorBuffer
        /// The options a plain GET left set (see `Transfer.PlainOptions`);
        /// nil when the handle is reset to libcurl's defaults.
        let plain: Transfer.PlainOptions?
    }

    /// Head lines that arrived on the loop's transfers, counted by their
    /// header callbacks: a turn that received part of a head spins for the
    /// rest of the response, which often follows within microseconds —
    /// nginx, for one, sends a file's body after its head, in a second
    /// packet. Body chunks do not count: a long download's loop sleeps
    /// between them as before, leaving the CPU to the sender and the
    /// body's consumer. Loop thread only.
    final class ReceiveCounter {
        var count: UInt64 = 0
    }

    struct Shared {
        var commands: [Command] = []
        /// The next transfer's number on this loop.
        var nextNumber: UInt64 = 1
        var shutDown = false
        /// Easy handles of finished transfers, ready for the next: reusing
        /// spares an allocation and libcurl's per-handle set-up.
        var idleHandles: [IdleHandle] = []
        /// The loop thread is in (or about to enter) `curl_multi_poll` and
        /// needs a wake-up for new commands; otherwise it finds them on its
        /// next turn, and the wake-up's system call is saved.
        var polling = false
        /// The loop cleaned up its multi handle: nobody may wake it any more.
        var multiClosed = false
    }

    /// Commands from other threads; the one piece of shared state.
    let shared = Lock(Shared())
    /// Set (under the lock) with each command queued and cleared when the
    /// loop takes them: what a spinning loop watches without the lock.
    let hasCommands = Atomic<Bool>(false)
    /// How long a loop that just did work, with transfers running, looks
    /// for a ready socket before it sleeps: a loopback server's answer.
    /// 30 µs was too short half the time; on a slow day of this machine
    /// 150 µs took 3–12% off 20,000 sequential GETs against 60 µs (three
    /// pairs in turns) and changed nothing at 16 in flight.
    static let socketSpinNanoseconds: UInt64 = 150_000
    /// How long a loop whose transfers all ended looks for the next command
    /// before it sleeps: a caller's turn-around — its thread woken, the
    /// response object built, the next request configured — took 100–150 µs
    /// on this project's 2-core machine, so a 60 µs spin caught it almost
    /// never and the loop slept and was woken for every sequential request.
    /// With 250 µs, 10,000 sequential GETs took 1.2–1.4 s instead of
    /// 2.2–2.3 s and less CPU (1.6–1.9 s against 2.0–2.1 s), as sleeping
    /// and being woken costs more than spinning. A caller slower
    /// than that makes the loop back off (`SpinPolicy`).
    static let commandSpinNanoseconds: UInt64 = 250_000
    /// Loops of the process (one per session) that may spin at once:
    /// one CPU fewer than the machine has, so that spinning loops never
    /// take every core from the threads that would bring their work —
    /// and none at all on one CPU.
    static let spinSlots = SpinSlots(limit: ProcessInfo.processInfo.activeProcessorCount - 1)
    private let multi: UnsafeMutableRawPointer
    /// The transport's share object (DNS, TLS sessions), when it has several
    /// loops; held until this loop's handles are cleaned up.
    let share: CurlShare?
    private var spinPolicy = SpinPolicy()
    /// Whether the loop spins at all (see `spin()`).
    private let spins: Bool
    /// Turns after which the loop would spin (whether or not a slot was free).
    let spinsWanted = Atomic(0)
    private let received = ReceiveCounter()
    private var transfers: [TransferID: Transfer] = [:]
    private var byHandle: [UnsafeMutableRawPointer: TransferID] = [:]
    /// Idle handles kept: enough for a burst of concurrent transfers.
    private static let idleHandleLimit = 64

    /// A loop with its own multi handle; `start()` starts its thread.
    ///
    /// - Throws: `CurlError` when libcurl cannot make a multi handle.
    init(maximumConnectionsPerHost: Int, share: CurlShare?, spins: Bool = true) throws(CurlError) {
        guard let multi = curl_multi_init() else { throw CurlError(multi: CURLM_OUT_OF_MEMORY) }
        self.spins = spins
        _ = urlloading_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, maximumConnectionsPerHost)
        _ = urlloading_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        self.multi = multi
        self.share = share
    }

    /// Frees the multi handle of a loop whose thread never started (the
    /// transport's set-up failed on a later loop).
    func discard() {
        shared.withLock { state in
            guard !state.multiClosed else { return }
            state.shutDown = true
            state.multiClosed = true
            curl_multi_cleanup(multi)
        }
    }

    /// Starts the loop's thread, named `name`.
    func start(name: String) {
        let thread = Thread { [self] in
            // Named from the thread itself: on Linux a name given before
            // `start()` stays on the Thread object, and the system's name
            // (what top, perf and gdb show) is the creating thread's.
            Thread.current.name = name
            run { taken in
                // The two arrays trade places: each keeps its capacity, so
                // queuing a command allocates nothing once both have grown.
                shared.withLock { state in
                    swap(&state.commands, &taken)
                    hasCommands.store(false, ordering: .relaxed)
                }
            }
        }
        thread.start()
    }

    /// Takes a number for a new transfer and, unless the loop is shut down,
    /// an idle easy handle to configure it on.
    func take() -> (number: UInt64, idle: IdleHandle?) {
        shared.withLock { state in
            let number = state.nextNumber
            state.nextNumber += 1
            return (number, state.shutDown ? nil : state.idleHandles.popLast())
        }
    }

    /// Queues `shutdown` once and wakes the loop.
    func shutdown() {
        shared.withLock { state in
            defer { state.shutDown = true }
            guard !state.shutDown else { return }
            state.commands.append(.shutdown)
            hasCommands.store(true, ordering: .releasing)
            // Under the lock: the loop frees its multi handle under it too.
            if !state.multiClosed { wakeHoldingLock() }
        }
    }

    /// Wakes the loop from `curl_multi_poll`. Called only while holding
    /// `shared`'s lock, under which the loop frees the multi handle: a
    /// wake-up after the loop ended would touch freed memory.
    func wakeHoldingLock() {
        curl_multi_wakeup(multi)
    }

    /// - Parameter takeCommands: Swaps the queued commands into its
    ///   argument, which it gets empty.
    private func run(takeCommands: (inout [Command]) -> Void) {
        var running: Int32 = 0
        var commands: [Command] = []
        let held = TurnWakeups.Held()
        TurnWakeups.hold(in: held)
        defer {
            held.flush()
            TurnWakeups.hold(in: nil)
        }
        loop: while true {
            takeCommands(&commands)
            var worked = !commands.isEmpty
            defer { commands.removeAll(keepingCapacity: true) }
            for command in commands {
                switch command {
                case .start(let id, let handOff, let body):
                    start(id, handOff.transfer, body)
                case .cancel(let id):
                    if let transfer = transfers[id] { transfer.observer.transferWasCancelled(after: transfer.metrics()) }
                    finish(id, .failure(.cancelled))
                case .unpause(let id):
                    if let transfer = transfers[id] {
                        transfer.paused = false
                        curl_easy_pause(transfer.handle, CURLPAUSE_CONT)
                    }
                case .shutdown:
                    for id in Array(transfers.keys) { finish(id, .failure(.shutDown)) }
                    break loop
                }
            }
            let receivedBefore = received.count
            curl_multi_perform(multi, &running)
            if received.count != receivedBefore { worked = true }
            var left: Int32 = 0
            while let message = curl_multi_info_read(multi, &left) {
                guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle,
                    let id = byHandle[handle], let transfer = transfers[id]
                else { continue }
                let code = message.pointee.data.result
                worked = true
                if code == CURLE_OK {
                    // An empty body never reached the write callback: the head goes now.
                    if transfer.connectOnly || transfer.deliverHead() {
                        transfer.deliverTrailers()
                        finish(id, .success(transfer.metrics()))
                    } else {
                        finish(id, .failure(transfer.failure ?? .badResponse("no final response")))
                    }
                } else {
                    finish(id, .failure(transfer.failure ?? .curl(CurlError(easy: code, detail: transfer.errorDetail))))
                }
            }
            expireIdleTransfers()
            held.flush()
            // A spin that found work: the next turn takes it without a poll.
            if worked, spin() { continue }
            // Sleep only with no command waiting; from here on, new
            // commands wake the poll. At least every 250 ms, for idle timeouts.
            let sleeps = shared.withLock { state -> Bool in
                state.polling = state.commands.isEmpty
                return state.polling
            }
            if sleeps {
                curl_multi_poll(multi, nil, 0, 250, nil)
                shared.withLock { $0.polling = false }
            }
        }
        shared.withLock { state in
            state.idleHandles.forEach { curl_easy_cleanup($0.pointer) }
            state.idleHandles.removeAll()
            state.multiClosed = true
            curl_multi_cleanup(multi)
        }
    }

    /// Waits without sleeping, at most `commandSpinNanoseconds` for a
    /// command or (with transfers running) `socketSpinNanoseconds` for a
    /// command or a ready socket. With several transfers running, a look
    /// that finds no socket ready yields the core: the callers' threads
    /// taking the answers that came in are then what the loop waits for,
    /// and on a machine with few cores the spin would otherwise take one
    /// from them (with the poll skipped after a spin that found work,
    /// about 5% less CPU at 16 GETs in flight; with one transfer the
    /// caller waits on the loop, and a yield only costs).
    /// Returns whether it found a command or a ready socket.
    private func spin() -> Bool {
        let wait: SpinPolicy.Wait = transfers.isEmpty ? .command : .socket
        guard spins, spinPolicy.shouldSpin(for: wait) else { return false }
        spinsWanted.add(1, ordering: .relaxed)
        guard Self.spinSlots.take() else { return false }
        defer { Self.spinSlots.give() }
        let budget = wait == .command ? Self.commandSpinNanoseconds : Self.socketSpinNanoseconds
        let deadline = DispatchTime.now().uptimeNanoseconds + budget
        var ready: Int32 = 0
        var caught = false
        while !caught, DispatchTime.now().uptimeNanoseconds < deadline {
            if hasCommands.load(ordering: .acquiring) {
                caught = true
            } else if transfers.isEmpty {
                urlloading_cpu_relax()
            } else {
                curl_multi_poll(multi, nil, 0, 0, &ready)
                caught = ready > 0
                if !caught, transfers.count > 1 { sched_yield() }
            }
        }
        spinPolicy.spun(for: wait, caughtWork: caught)
        return caught
    }

    private func expireIdleTransfers() {
        let now = DispatchTime.now().uptimeNanoseconds
        for (id, transfer) in transfers where transfer.isIdle(at: now) {
            finish(id, .failure(.idleTimeout(transfer.idleSeconds ?? 0)))
        }
    }

    private func start(_ id: TransferID, _ transfer: Transfer, _ body: TransferRequest.Body) {
        let code = curl_multi_add_handle(multi, transfer.handle)
        guard code == CURLM_OK else {
            transfer.close()
            transfer.observer.transferDidComplete(.failure(.curl(CurlError(multi: code))))
            return
        }
        transfers[id] = transfer
        byHandle[transfer.handle] = id
        transfer.loopReceived = received
        if case .stream(let pipe, _) = body {
            // A paused read goes on when the producer wrote more.
            pipe.setReadableHandler { [weak self] in self?.send(.unpause(id)) }
        }
    }

    /// Queues a command from any thread (the loop's own included) and
    /// wakes the loop if it sleeps; false after shutdown (not queued).
    @discardableResult
    func send(_ command: Command) -> Bool {
        shared.withLock { state -> Bool in
            guard !state.shutDown else { return false }
            state.commands.append(command)
            hasCommands.store(true, ordering: .releasing)
            if state.polling, !state.multiClosed { wakeHoldingLock() }
            return true
        }
    }

    /// Removes a transfer and tells its observer, exactly once.
    private func finish(_ id: TransferID, _ result: Result<TransferMetrics, TransferError>) {
        guard let transfer = transfers.removeValue(forKey: id) else { return }
        byHandle[transfer.handle] = nil
        // The observer hears first, so the caller's thread wakes while the
        // handle is taken apart: observers get the result alone, never the
        // handle, and a transfer they start is a command, added on a later
        // turn, when this one's connection is free again.
        transfer.observer.transferDidComplete(result)
        curl_multi_remove_handle(multi, transfer.handle)
        // A connect-only handle still owns its connection: never reused.
        guard !transfer.connectOnly else {
            transfer.close()
            return
        }
        let idle = transfer.close(keepingHandle: { if case .success = result { true } else { false } }())
        let pooled = shared.withLock { state -> Bool in
            guard state.idleHandles.count < Self.idleHandleLimit, !state.shutDown else { return false }
            state.idleHandles.append(idle)
            return true
        }
        if !pooled { curl_easy_cleanup(idle.pointer) }
    }
}
