import Dispatch
package import Foundation
import Locking
package import Logging
package import URLLoading

/// transferd's owner of every background task: it takes the
/// apps' messages and the transfers' events on one serial queue, runs each
/// task's `BackgroundTransferMachine`, writes the new state to the journal,
/// and only then acts (starts or stops a transfer, sends an event, removes
/// files). The transfers run on a `Session` of this process; their bodies
/// go to files on the session's task contexts, never on this queue.
package final class Daemon: Sendable {
    /// What can be tuned (from the environment, for tests and packagers).
    package struct Settings: Sendable {
        /// Transfers handed to the transport at once (discretionary ones
        /// take what is left). The transport opens at most six connections
        /// per host (Apple's default on macOS); the transfers past that
        /// wait in its queue and start the moment a connection frees, with
        /// no turn of the owner between one transfer's end and the next's
        /// start. Their request timeout counts from their sending.
        package var maximumRunning = 16
        /// The first retry's wait after a network error (then doubling).
        package var firstRetryDelay: TimeInterval = BackgroundTransferMachine.firstRetryDelay
        /// Delivered tasks are forgotten after this long.
        package var keepDelivered: TimeInterval = 86_400
        /// Between two launches of a session's app that did not attach.
        package var launchRetryDelay: TimeInterval = 60
        /// How long a challenge waits for an app's answer (or for an app to
        /// attach) before the session's stored credential answers it.
        package var challengeWait: TimeInterval = 60

        package init() {}

        /// `URLLOADING_TRANSFERD_RETRY_DELAY`, `URLLOADING_TRANSFERD_LAUNCH_DELAY`
        /// and `URLLOADING_TRANSFERD_CHALLENGE_WAIT` (seconds, 0.01...3600) and `URLLOADING_TRANSFERD_MAX_RUNNING`
        /// (1...64), checked; anything else is ignored.
        package init(environment: [String: String]) {
            if let text = environment["URLLOADING_TRANSFERD_RETRY_DELAY"], let value = Double(text), value.isFinite, (0.01...3600).contains(value) {
                firstRetryDelay = value
            }
            if let text = environment["URLLOADING_TRANSFERD_LAUNCH_DELAY"], let value = Double(text), value.isFinite, (0.01...3600).contains(value) {
                launchRetryDelay = value
            }
            if let text = environment["URLLOADING_TRANSFERD_CHALLENGE_WAIT"], let value = Double(text), value.isFinite, (0.01...3600).contains(value) {
                challengeWait = value
            }
            if let text = environment["URLLOADING_TRANSFERD_MAX_RUNNING"], let value = Int(text), (1...64).contains(value) {
                maximumRunning = value
            }
        }
    }

    package let paths: BackgroundPaths
    package let settings: Settings
    let journal: Journal
    let logger: Logger
    /// Every change of state happens here, in order.
    let owner = DispatchQueue(label: "urlloading.transferd.owner")
    /// Touched on `owner` only; the lock makes that checkable.
    let state = Lock(State())
    /// What transfers' contexts handed to `owner` and it has not run yet (`fromTransfer`).
    private let arrivals = Lock<[@Sendable () -> Void]>([])
    let runner: TransferRunner

    struct State {
        /// Every task not yet delivered; written through `put`, which keeps
        /// `startable` and `ids` true. A delivered task is the app's past:
        /// it stays in the journal (for listings, until pruned), not here,
        /// so a daemon that runs for weeks holds only what is under way.
        private(set) var records: [Int64: TransferRecord] = [:]
        /// Each session's tasks: the app's task identifier → the record's id.
        private(set) var ids: [String: [Int: Int64]] = [:]
        /// The tasks waiting for a transfer slot (queued, not suspended),
        /// with whether each is discretionary: what `schedule` chooses from
        /// without reading every record.
        private(set) var startable: [Int64: Bool] = [:]
        /// The attached session of each identifier.
        var clients: [String: Client] = [:]
        var running: [Int64: RunningTransfer] = [:]
        var lastActivity = Date()
        /// Sessions with a launch check scheduled.
        var launchChecks: Set<String> = []
        /// Sessions whose app was launched as often as allowed and never
        /// attached, or named no launch command: said once until it attaches.
        var gaveUpLaunching: Set<String> = []
        /// Challenges waiting for an app's answer, by task record.
        var challenges: [Int64: PendingChallenge] = [:]
        /// Sessions' persistent credential stores, opened when first needed.
        var credentialStores: [String: CredentialStore] = [:]
        /// What this turn on `owner` changed, written at its end (`commit`).
        var pending = Pending()

        /// Stores a task's record, and whether it waits for a slot.
        mutating func put(_ record: TransferRecord) {
            guard record.machine.phase != .delivered else {
                records.removeValue(forKey: record.id)
                startable.removeValue(forKey: record.id)
                if ids[record.session]?.removeValue(forKey: record.spec.task) != nil, ids[record.session]?.isEmpty == true {
                    ids.removeValue(forKey: record.session)
                }
                return
            }
            records[record.id] = record
            ids[record.session, default: [:]][record.spec.task] = record.id
            if record.machine.phase == .queued, !record.suspended {
                startable[record.id] = record.spec.isDiscretionary
            } else {
                startable.removeValue(forKey: record.id)
            }
        }
    }

    /// The changes of one turn on `owner`: each changed task's last state,
    /// and the actions of every change, in order.
    struct Pending {
        private(set) var records: [TransferRecord] = []
        private var positions: [Int64: Int] = [:]
        private(set) var actions: [(id: Int64, kind: TaskSpec.Kind, actions: [BackgroundTransferMachine.Action])] = []

        var isEmpty: Bool { records.isEmpty && actions.isEmpty }

        mutating func note(_ record: TransferRecord) {
            if let at = positions[record.id] {
                records[at] = record
            } else {
                positions[record.id] = records.count
                records.append(record)
            }
        }

        mutating func act(_ actions: [BackgroundTransferMachine.Action], on record: TransferRecord) {
            if !actions.isEmpty { self.actions.append((record.id, record.spec.kind, actions)) }
        }
    }

    /// A connected app or tool.
    final class Client: Sendable {
        let socket: UnixSocket
        let identifier = Lock<String?>(nil)
        /// The app's `BackgroundMessage.revision` (1 when it said none).
        let revision = Lock(1)
        init(socket: UnixSocket) { self.socket = socket }
    }

    /// Opens the journal and recovers every task in it.
    package init(paths: BackgroundPaths, settings: Settings = Settings(), logger: Logger = Logger(label: "urlloading.transferd")) throws {
        self.paths = paths
        self.settings = settings
        self.logger = logger
        try paths.prepareState()
        journal = try Journal(path: paths.journal, logger: logger)
        runner = TransferRunner()
        runner.daemon.withLock { $0 = self }
        try journal.pruneDelivered(before: Date().addingTimeInterval(-settings.keepDelivered))
        let records = try journal.records()
        owner.sync { recover(records) }
    }

    /// Every task in the journal goes on where it was: a transfer that was
    /// running resumes from its partial file's bytes.
    private func recover(_ records: [TransferRecord]) {
        let now = Date()
        for var record in records {
            let fileBytes = fileSize(partialFile(record.id))
            let actions = record.machine.recovered(now: now, fileBytes: fileBytes)
            state.withLock { state in
                state.put(record)
                state.pending.note(record)
                state.pending.act(actions, on: record)
            }
        }
        commit()
        logger.info("transferd recovered \(records.count) tasks from \(paths.journal)")
    }

    // MARK: Messages

    /// Acts on a client's message, on `owner`, within a turn (see
    /// `commit`); `body` is an upload's passed descriptor, owned (and
    /// closed) here.
    func handle(_ message: BackgroundMessage, body: Int32? = nil, from client: Client) {
        state.withLock { $0.lastActivity = Date() }
        switch message {
        case .attach(let attachment): attach(attachment, client)
        case .create(let spec): create(spec, body: body, client)
        case .resume(let task):
            change(task, client) { record in
                record.suspended = false
                return []
            }
        case .suspend(let task):
            change(task, client) { record in
                record.suspended = true
                return record.machine.interrupted()
            }
        case .cancel(let task): change(task, client) { $0.machine.cancel() }
        case .answerBegin(let task, let proceed, let request):
            change(task, client) { record in
                if proceed, let request { record.spec.request = request }
                return record.machine.answerBegin(proceed ? .proceed : .cancel)
            }
        case .acknowledge(let task): change(task, client) { $0.machine.acknowledged() }
        case .answerChallenge(let task, let answer):
            guard let session = client.identifier.withLock({ $0 }), let id = id(of: task, session: session) else { break }
            state.withLock { $0.challenges.removeValue(forKey: id) }?.resume(answer)
        case .cancelTransfer(let session, let task):
            let found = id(of: task, session: session) != nil
            if found { change(task, session: session) { $0.machine.cancel() } }
            commit()
            send(.done(ok: found, message: found ? "cancelled" : "no task \(task) in session \(session)"), to: client)
        case .retryTransfer(let session, let task):
            var retried = false
            if id(of: task, session: session) != nil {
                change(task, session: session) { record in
                    retried = record.machine.retryNow()
                    return []
                }
            }
            let message = retried ? "retrying now" : "task \(task) of session \(session) is not waiting to retry"
            commit()
            send(.done(ok: retried, message: message), to: client)
        default:
            logger.warning("a client sent a message only transferd sends; ignored")
        }
    }

    private func attach(_ attachment: Attachment, _ client: Client) {
        let identifier = attachment.identifier
        if let other = state.withLock({ $0.clients[identifier] }), other !== client {
            send(.refused(reason: "a session with the identifier \"\(identifier)\" is attached in another process"), to: client)
            client.socket.shutdownBoth()
            return
        }
        client.identifier.withLock { $0 = identifier }
        client.revision.withLock { $0 = attachment.revision ?? 1 }
        if (attachment.revision ?? 1) >= 3 { client.socket.sendCompactFrames() }
        state.withLock { state in
            state.clients[identifier] = client
            state.gaveUpLaunching.remove(identifier)
        }
        do {
            try journal.recordAttachment(launchCommand: attachment.launchCommand, credentialStore: attachment.credentialStore, session: identifier)
        } catch {
            logger.error("cannot record the launch command of \(identifier): \(error)")
        }
        // (Delivered tasks are not in memory: never listed or sent again.)
        let records = state.withLock { state in (state.ids[identifier] ?? [:]).values.compactMap { state.records[$0] } }
            .sorted { $0.spec.task < $1.spec.task }
        let finished = records.filter { if case .finished = $0.machine.phase { true } else { false } }
        let summaries = records.map {
            TaskSummary(
                spec: $0.spec, finished: $0.machine.isFinished, sent: $0.spec.kind == .upload ? $0.machine.bytes : 0,
                written: $0.spec.kind == .download ? $0.machine.bytes : 0, expectedToWrite: $0.expected)
        }
        let next = (try? journal.nextTask(session: identifier)) ?? 1
        send(
            .attached(
                nextTask: max(next, (records.map(\.spec.task).max() ?? 0) + 1), tasks: summaries, pending: finished.count,
                revision: BackgroundMessage.revision), to: client)
        for record in finished { send(.finished(result(of: record)), to: client) }
        send(.eventsDone, to: client)
        // Questions that waited for the app.
        for record in records where record.machine.phase == .askingToBegin { send(.askBegin(task: record.spec.task), to: client) }
        let challenges = state.withLock { $0.challenges.values.filter { $0.session == identifier } }
        for pending in challenges { send(.challenge(task: pending.task, challenge: pending.spec), to: client) }
    }

    /// Acts on a batch of a client's messages, in order, within one turn:
    /// a run of new downloads is journaled in one transaction.
    func handle(_ batch: [(message: BackgroundMessage, body: Int32?)], from client: Client) {
        var index = batch.startIndex
        while index < batch.endIndex {
            var run: [TaskSpec] = []
            while index < batch.endIndex, case .create(let spec) = batch[index].message, spec.kind == .download, batch[index].body == nil {
                run.append(spec)
                index += 1
            }
            if run.count > 1 {
                createDownloads(run, client)
            } else if let spec = run.first {
                handle(.create(spec), from: client)
            } else {
                handle(batch[index].message, body: batch[index].body, from: client)
                index += 1
            }
        }
    }

    /// New downloads (no body to copy) journaled in one transaction; when
    /// that fails, each is created on its own (and says why it failed).
    private func createDownloads(_ specs: [TaskSpec], _ client: Client) {
        guard let session = client.identifier.withLock({ $0 }) else {
            for spec in specs { create(spec, body: nil, client) }
            return
        }
        state.withLock { $0.lastActivity = Date() }
        let records = specs.map { Self.newRecord($0, session: session) }
        guard let inserted = try? journal.insert(records) else {
            for spec in specs { create(spec, body: nil, client) }
            return
        }
        state.withLock { state in
            for record in inserted {
                state.put(record)
                state.pending.act(record.machine.initialActions, on: record)
            }
        }
    }

    /// A new task's record, before the journal gave it an id. A task is
    /// suspended until resumed, in its own message or (revision 2) this one.
    private static func newRecord(_ spec: TaskSpec, session: String) -> TransferRecord {
        var kept = spec
        kept.resumed = nil
        return TransferRecord(
            id: 0, session: session, spec: kept, machine: BackgroundTransferMachine(earliestBeginDate: spec.earliestBeginDate, now: Date()),
            suspended: spec.resumed != true, created: Date())
    }

    private func create(_ spec: TaskSpec, body: Int32?, _ client: Client) {
        defer { if let body { close(body) } }
        guard let session = client.identifier.withLock({ $0 }) else {
            send(.done(ok: false, message: "attach before creating tasks"), to: client)
            return
        }
        var record = Self.newRecord(spec, session: session)
        do {
            if spec.kind == .upload {
                // The body is copied first: the app may delete its file or die.
                guard let source = spec.bodyFile else { throw BackgroundWireError("an upload task needs a body file") }
                let inserted = try journal.insert(record)
                record = inserted
                try copyBody(from: source, descriptor: body, to: bodyCopy(record.id))
                record.spec.bodyFile = bodyCopy(record.id)
                record.spec.bodyPassed = nil
                try journal.save(record)
            } else {
                record = try journal.insert(record)
            }
        } catch {
            logger.error("cannot journal task \(spec.task) of \(session): \(error)")
            record.machine = BackgroundTransferMachine(phase: .finished(.failed(reason: "\(error)")), bytes: 0, validator: nil, attempts: 0)
            record.errorCode = SessionError.Code.cannotWriteFile.description
            record.errorMessage = "transferd could not keep the task: \(error)"
            record.finished = Date()
            if record.id != 0 {
                persist([record])
                // Kept for delivery: the app may be gone before it hears this.
                state.withLock { $0.put(record) }
            }
            send(.finished(result(of: record)), to: client)
            return
        }
        state.withLock { state in
            state.put(record)
            state.pending.act(record.machine.initialActions, on: record)
        }
    }

    /// Runs `body` on a task's record, journals the result, then acts.
    private func change(_ task: Int, _ client: Client, _ body: (inout TransferRecord) -> [BackgroundTransferMachine.Action]) {
        guard let session = client.identifier.withLock({ $0 }) else { return }
        change(task, session: session, body)
    }

    func change(_ task: Int, session: String, _ body: (inout TransferRecord) -> [BackgroundTransferMachine.Action]) {
        guard let id = id(of: task, session: session) else { return }
        change(id: id, body)
    }

    /// The one way a task's state changes: mutate now; written and acted
    /// on when the turn commits.
    func change(id: Int64, _ body: (inout TransferRecord) -> [BackgroundTransferMachine.Action]) {
        guard var record = state.withLock({ $0.records[id] }) else { return }
        let actions = body(&record)
        if record.machine.isFinished, record.finished == nil { record.finished = Date() }
        state.withLock { state in
            state.put(record)
            state.pending.note(record)
            state.pending.act(actions, on: record)
        }
    }

    /// Runs `work` (a transfer's end or progress, from its context) on
    /// `owner`, in the order of arrival; what arrives while `owner` is busy
    /// runs in one turn, so that ends that come together are journaled in
    /// one transaction.
    func fromTransfer(_ work: @escaping @Sendable () -> Void) {
        let first = arrivals.withLock { arrivals in
            arrivals.append(work)
            return arrivals.count == 1
        }
        guard first else { return }
        owner.async { [self] in
            let works = arrivals.withLock { arrivals in
                defer { arrivals = [] }
                return arrivals
            }
            turn {
                for work in works { work() }
            }
        }
    }

    /// Runs `body` on `owner` as one turn: what it changed is committed
    /// (`commit`) when it returns, on every path out of it.
    func turn<T>(_ body: () -> T) -> T {
        defer { commit() }
        return body()
    }

    /// Ends a turn on `owner`: the turn's changes, with the starts of
    /// transfers that free slots allow, are written to the journal in one
    /// transaction, and only then acted on; the actions' own changes (and
    /// the starts their freed slots allow) make the next round, until
    /// nothing changes. A crash before a write acts on nothing of it; after
    /// it, recovery acts on what was written.
    func commit() {
        while true {
            schedule()
            let pending = state.withLock { state -> Pending in
                defer { state.pending = Pending() }
                return state.pending
            }
            guard !pending.isEmpty else { return }
            persist(pending.records)
            for (id, kind, actions) in pending.actions { apply(actions, to: id, kind: kind) }
        }
    }

    func id(of task: Int, session: String) -> Int64? {
        state.withLock { $0.ids[session]?[task] }
    }

    /// Writes records; a journal that cannot be written is logged (the
    /// tasks go on in memory, and the next write tries again).
    func persist(_ records: [TransferRecord]) {
        do {
            try journal.save(records)
        } catch {
            let tasks = records.prefix(8).map { "\($0.spec.task) of \($0.session)" }.joined(separator: ", ")
            logger.error("cannot write \(records.count) task changes (\(tasks)\(records.count > 8 ? ", …" : "")) to the journal: \(error)")
        }
    }

    /// A client went away: its session is detached; its tasks go on.
    func detach(_ client: Client) {
        if let identifier = client.identifier.withLock({ $0 }) {
            state.withLock { state in
                if state.clients[identifier] === client { state.clients[identifier] = nil }
            }
        }
        client.socket.close()
    }

    func send(_ message: BackgroundMessage, to client: Client) {
        do {
            try client.socket.send(message)
        } catch {
            // The reader sees the end and detaches the client.
            logger.info("a client went away: \(error)")
        }
    }

    /// The attached client of a session, if any.
    func client(of session: String) -> Client? {
        state.withLock { $0.clients[session] }
    }

    /// What the app hears of a finished task.
    func result(of record: TransferRecord) -> TaskResult {
        var code = record.errorCode
        var message = record.errorMessage
        if case .finished(.cancelled) = record.machine.phase {
            code = SessionError.Code.cancelled.description
            message = "the task was cancelled"
        } else if case .finished(.failed(let reason)) = record.machine.phase, code == nil {
            code = SessionError.Code.unknown.description
            message = reason
        }
        let succeeded = code == nil
        return TaskResult(
            task: record.spec.task, file: succeeded && record.spec.kind == .download ? finishedFile(record.id) : nil,
            response: record.response, body: record.responseBody, errorCode: code, errorMessage: message,
            sent: record.spec.kind == .upload ? record.machine.bytes : 0, written: record.spec.kind == .download ? record.machine.bytes : 0,
            expectedToWrite: record.spec.kind == .download ? record.expected : nil)
    }
}
