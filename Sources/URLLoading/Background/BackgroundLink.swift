import Foundation
import Locking
import Logging

/// A background session's connection to `transferd`: attaches
/// under the session's identifier, reads transferd's messages on a thread
/// of its own and hands them to the session; when transferd goes away
/// (killed, restarted) it starts it again and re-attaches, so the
/// session's tasks go on.
final class BackgroundLink: Sendable {
    let identifier: String
    /// Where its transferd keeps things (read from the environment once, at attaching).
    let paths: BackgroundPaths
    private let launchCommand: [String]?
    private let credentialStore: String?
    private let state = Lock(State())
    private let logger = Logger(label: "urlloading.background")

    private struct State {
        var socket: UnixSocket?
        var handler: (@Sendable (BackgroundMessage) -> Void)?
        var closed = false
        /// The attached transferd's revision (1 when it said none).
        var revision = 1
    }

    /// transferd's answer to an attachment.
    struct Attached: Sendable {
        var nextTask: Int
        var tasks: [TaskSummary]
        var pending: Int
        var revision: Int?
    }

    /// Whether the attached transferd starts a task its `create` asks to
    /// start (revision 2), without a `resume` of its own.
    var createsResumed: Bool { state.withLock { $0.revision >= 2 } }

    private init(identifier: String, paths: BackgroundPaths, launchCommand: [String]?, credentialStore: String?) {
        self.credentialStore = credentialStore
        self.identifier = identifier
        self.paths = paths
        self.launchCommand = launchCommand
    }

    /// Connects (starting transferd if needed) and attaches.
    static func attach(identifier: String, launchCommand: [String]?, credentialStore: String?) throws(SessionError) -> (BackgroundLink, Attached) {
        let link = BackgroundLink(identifier: identifier, paths: BackgroundPaths(), launchCommand: launchCommand, credentialStore: credentialStore)
        let attached = try link.connectAndAttach()
        return (link, attached)
    }

    private func connectAndAttach() throws(SessionError) -> Attached {
        do {
            let attach = BackgroundMessage.attach(
                Attachment(identifier: identifier, processID: getpid(), launchCommand: launchCommand, credentialStore: credentialStore))
            // transferd would close the connection on an attach out of its
            // bounds (a session identifier of 2,000 bytes): say which, and
            // start no transferd for it.
            try attach.check()
            let socket = try TransferdLauncher.connect(paths)
            try socket.send(attach)
            guard socket.waitReadable(seconds: 10) else { throw BackgroundWireError("transferd did not answer within 10 s") }
            var framing = BackgroundFraming()
            switch try socket.receive(&framing) {
            case .attached(let nextTask, let tasks, let pending, let revision)?:
                // Messages after the answer (events) are read by the reader thread.
                state.withLock { state in
                    state.socket = socket
                    state.revision = revision ?? 1
                }
                if (revision ?? 1) >= 3 { socket.sendCompactFrames() }
                reader(socket, framing)
                return Attached(nextTask: nextTask, tasks: tasks, pending: pending, revision: revision)
            case .refused(let reason)?:
                throw SessionError(.backgroundSessionInUseByAnotherProcess, failingURL: nil, message: reason)
            default:
                throw BackgroundWireError("transferd closed the connection without an answer")
            }
        } catch let error as SessionError {
            throw error
        } catch {
            throw SessionError(.backgroundSessionWasDisconnected, failingURL: nil, message: "cannot attach to transferd: \(error)")
        }
    }

    /// Installs the session's handler; messages read before it wait for it.
    func start(_ handler: @escaping @Sendable (BackgroundMessage) -> Void) {
        state.withLock { $0.handler = handler }
        startGate.withLock { $0.open() }
    }

    /// The reader waits for `start` (the session is made in between).
    private let startGate = Lock(Gate())

    private struct Gate {
        var isOpen = false
        var waiting: [@Sendable () -> Void] = []
        mutating func open() {
            isOpen = true
            let run = waiting
            waiting = []
            run.forEach { $0() }
        }
    }

    private func reader(_ socket: UnixSocket, _ framing: BackgroundFraming) {
        Thread.detachNewThread { [self] in
            var framing = framing
            while true {
                let message: BackgroundMessage?
                do {
                    message = try socket.receive(&framing)
                } catch {
                    logger.error("transferd sent something that is not a message: \(error)")
                    message = nil
                }
                guard let message else { break }
                deliver(message)
            }
            reconnect(after: socket)
        }
    }

    private func deliver(_ message: BackgroundMessage) {
        // Before the session installed its handler, wait for it (it comes
        // at the end of the session's initializer).
        let semaphore = DispatchSemaphore(value: 0)
        let ready = startGate.withLock { gate -> Bool in
            if gate.isOpen { return true }
            gate.waiting.append { semaphore.signal() }
            return false
        }
        if !ready { semaphore.wait() }
        state.withLock { $0.handler }?(message)
    }

    /// transferd went away: start it again and attach again (3 tries), or
    /// tell the session the link is lost.
    private func reconnect(after socket: UnixSocket) {
        let closed = state.withLock { state -> Bool in
            if state.socket === socket { state.socket = nil }
            return state.closed
        }
        socket.close()
        guard !closed else { return }
        logger.warning("transferd went away; starting it again", metadata: ["session": "\(identifier)"])
        var lastError: SessionError?
        for _ in 0..<3 {
            do {
                let attached = try connectAndAttach()
                deliver(.attached(nextTask: attached.nextTask, tasks: attached.tasks, pending: attached.pending, revision: attached.revision))
                return
            } catch {
                lastError = error
            }
        }
        deliver(.refused(reason: lastError.map { "\($0)" } ?? "transferd went away"))
    }

    /// Sends a message (with an open descriptor, see `UnixSocket.send`);
    /// false when transferd cannot be reached now.
    @discardableResult
    func send(_ message: BackgroundMessage, passing descriptor: Int32? = nil) -> Bool {
        guard let socket = state.withLock({ $0.socket }) else { return false }
        do {
            try socket.send(message, passing: descriptor)
            return true
        } catch {
            logger.warning("cannot reach transferd: \(error)", metadata: ["session": "\(identifier)"])
            return false
        }
    }

    /// Acknowledgements, each with what runs once it is written. Each
    /// task's events run on a context of their own, so acknowledgements
    /// come from many threads at once: they go in one write, by the first
    /// of those threads, and the others go on instead of waiting for the
    /// socket.
    private let acknowledgements = WriteCombiner<(task: Int, then: @Sendable () -> Void)>()

    /// Tells transferd a task's delegate returned from its last event, then
    /// runs `then`: once the acknowledgement was written (or could not be:
    /// transferd sends the event again at the next attach).
    func acknowledge(_ task: Int, then: @escaping @Sendable () -> Void) {
        acknowledgements.add((task, then)) { batch in
            send(batch.map { .acknowledge(task: $0.task) })
            for entry in batch { entry.then() }
        }
    }

    /// Sends messages in one write; false when transferd cannot be reached now.
    @discardableResult
    func send(_ messages: [BackgroundMessage]) -> Bool {
        guard let socket = state.withLock({ $0.socket }) else { return false }
        do {
            try socket.send(messages)
            return true
        } catch {
            logger.warning("cannot reach transferd: \(error)", metadata: ["session": "\(identifier)"])
            return false
        }
    }

    /// Detaches: transferd keeps the tasks going and their events for the next session.
    func close() {
        let socket = state.withLock { state -> UnixSocket? in
            state.closed = true
            return state.socket
        }
        socket?.shutdownBoth()
    }
}
