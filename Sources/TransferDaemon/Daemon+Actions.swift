import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import URLLoading

/// What the daemon does once a change is journaled: transfers started and
/// stopped, timers, events sent, files removed.
extension Daemon {
    func apply(_ actions: [BackgroundTransferMachine.Action], to id: Int64, kind: TaskSpec.Kind) {
        for action in actions {
            switch action {
            case .startTransfer(let from, let ifRange): startTransfer(id, from: from, ifRange: ifRange)
            case .cancelTransfer:
                let running = state.withLock { $0.running.removeValue(forKey: id) }
                // A question still open dies with its transfer.
                state.withLock { $0.challenges.removeValue(forKey: id) }?.resume(BackgroundChallengeAnswer(disposition: .cancelAuthenticationChallenge))
                running?.stop()
            case .truncateFile: truncate(partialFile(id))
            case .wake(let date):
                let delay = max(0, date.timeIntervalSinceNow)
                owner.asyncAfter(deadline: .now() + delay) { [self] in
                    turn { change(id: id) { $0.machine.wake(now: Date()) } }
                }
            case .askAppToBegin:
                guard let record = state.withLock({ $0.records[id] }) else { continue }
                if let client = client(of: record.session) {
                    send(.askBegin(task: record.spec.task), to: client)
                } else {
                    // No app to ask (Apple's sessions also go on): the request as it is.
                    change(id: id) { $0.machine.answerBegin(.proceed) }
                }
            case .deliverEvents:
                guard let record = state.withLock({ $0.records[id] }) else { continue }
                if let client = client(of: record.session) {
                    send(.finished(result(of: record)), to: client)
                } else {
                    launchApp(of: record.session)
                }
            case .removeFiles:
                for path in files(of: id, kind: kind) { unlink(path) }
            }
        }
    }

    /// Starts queued transfers while slots are free, oldest first,
    /// discretionary ones last (once a turn, from `commit`).
    func schedule() {
        let startable = state.withLock { state -> [Int64] in
            let free = settings.maximumRunning - state.running.count
            guard free > 0 else { return [] }
            // The `free` first by (discretionary last, oldest first): a pass
            // over the waiting tasks' ids, not a sort of every record.
            var chosen: [(discretionary: Bool, id: Int64)] = []
            chosen.reserveCapacity(free + 1)
            for (id, discretionary) in state.startable where state.running[id] == nil {
                let key = (discretionary: discretionary, id: id)
                guard chosen.count < free || Self.startsBefore(key, chosen[chosen.count - 1]) else { continue }
                let at = chosen.firstIndex { Self.startsBefore(key, $0) } ?? chosen.count
                chosen.insert(key, at: at)
                if chosen.count > free { chosen.removeLast() }
            }
            return chosen.map(\.id)
        }
        for id in startable { change(id: id) { $0.machine.start() } }
    }

    /// Which of two waiting tasks starts first: not discretionary before
    /// discretionary, then the older (its journal row id is smaller).
    static func startsBefore(_ a: (discretionary: Bool, id: Int64), _ b: (discretionary: Bool, id: Int64)) -> Bool {
        a.discretionary != b.discretionary ? !a.discretionary : a.id < b.id
    }

    // MARK: Files

    /// A download's body while it arrives.
    func partialFile(_ id: Int64) -> String { paths.partialFile(id) }
    /// A download's whole body, until the app takes it.
    func finishedFile(_ id: Int64) -> String { "\(paths.files)/download-\(id)" }
    /// transferd's copy of an upload's body.
    func bodyCopy(_ id: Int64) -> String { "\(paths.files)/upload-\(id)" }
    /// Every file transferd may have made for a task of `kind` (each a
    /// system call to remove, which fails for those that are gone).
    func files(of id: Int64, kind: TaskSpec.Kind) -> [String] {
        switch kind {
        case .download: [partialFile(id), finishedFile(id)]
        case .upload: [bodyCopy(id)]
        }
    }

    func fileSize(_ path: String) -> Int64? {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    func truncate(_ path: String) {
        let fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = ftruncate(fd, 0)
        close(fd)
    }

    /// Copies an upload's body into transferd's folder (a hard link when the
    /// file system allows, else a copy), 0600. With `descriptor` (the app's
    /// open body, owned by the caller) the bytes come from it: the path may
    /// be gone or name another file by now.
    func copyBody(from source: String, descriptor: Int32?, to destination: String) throws {
        unlink(destination)
        var input: Int32
        if let descriptor {
            var held = stat()
            guard fstat(descriptor, &held) == 0, held.st_mode & S_IFMT == S_IFREG else {
                throw BackgroundWireError("the upload body \(source) is not a regular file")
            }
            var named = stat()
            if stat(source, &named) == 0, named.st_dev == held.st_dev, named.st_ino == held.st_ino, link(source, destination) == 0 { return }
            input = dup(descriptor)
        } else {
            if link(source, destination) == 0 { return }
            input = open(source, O_RDONLY | O_CLOEXEC)
        }
        guard input >= 0 else { throw BackgroundWireError("cannot open the upload body \(source): \(String(cString: strerror(errno)))") }
        defer { close(input) }
        guard lseek(input, 0, SEEK_SET) == 0 else { throw BackgroundWireError("cannot read the upload body \(source) from its start") }
        let output = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw BackgroundWireError("cannot copy the upload body: \(String(cString: strerror(errno)))") }
        defer { close(output) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if count == 0 { break }
            guard count > 0 else { throw BackgroundWireError("cannot read the upload body: \(String(cString: strerror(errno)))") }
            var offset = 0
            while offset < count {
                let written = buffer.withUnsafeBytes { write(output, $0.baseAddress.map { $0 + offset }, count - offset) }
                guard written > 0 else { throw BackgroundWireError("cannot copy the upload body: \(String(cString: strerror(errno)))") }
                offset += written
            }
        }
    }

    // MARK: Transfers

    /// - Parameter onSession: Run the transfer on a task of the session,
    ///   never on the transport directly (a direct download's head asked
    ///   for what the session decides).
    func startTransfer(_ id: Int64, from: Int64, ifRange: String?, onSession: Bool = false) {
        guard let record = state.withLock({ $0.records[id] }), let url = URL(string: record.spec.request.url) else {
            change(id: id) { $0.machine.failed(reason: "the task's URL cannot be read", retryable: false, retryAfter: nil, now: Date()) }
            return
        }
        var request = URLRequest(url: url)
        request.httpMethod = record.spec.request.method
        request.timeoutInterval = record.spec.request.timeout > 0 ? record.spec.request.timeout : 60
        for pair in record.spec.request.headers where pair.count == 2 {
            request.addValue(pair[1], forHTTPHeaderField: pair[0])
        }
        let running: RunningTransfer
        switch record.spec.kind {
        case .download:
            // From byte 0: emptied as it is opened (one call, not three).
            let fd = open(partialFile(id), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (from == 0 ? O_TRUNC : 0), 0o600)
            guard fd >= 0 else {
                let reason = "cannot open the partial file: \(String(cString: strerror(errno)))"
                change(id: id) { record in
                    record.errorCode = SessionError.Code.cannotWriteFile.description
                    record.errorMessage = reason
                    return record.machine.failed(reason: reason, retryable: false, retryAfter: nil, now: Date())
                }
                return
            }
            // The file holds exactly the bytes the machine counts.
            if from > 0 {
                _ = ftruncate(fd, off_t(from))
                _ = lseek(fd, off_t(from), SEEK_SET)
                request.setValue("bytes=\(from)-", forHTTPHeaderField: "Range")
                if let ifRange { request.setValue(ifRange, forHTTPHeaderField: "If-Range") }
            }
            running = RunningTransfer(id: id, kind: .download, descriptor: fd, offset: from)
            state.withLock { $0.running[id] = running }
            let session = runner.session(for: record.spec)
            // A plain GET runs on the transport itself; what the session
            // decides (redirects, challenges, proxies) runs on a task.
            if !onSession, let (transfer, executor) = session.directTransfer(for: request) {
                let firstTry = from == 0 && record.machine.validator == nil
                running.start(
                    DirectDownload(
                        running: running, url: url, request: transfer, executor: executor, daemon: self, from: from, ifRange: ifRange,
                        writesBeforeJournal: firstTry))
            } else {
                running.start(session.dataTask(with: request), runner: runner)
            }
        case .upload:
            let body = bodyCopy(id)
            running = RunningTransfer(id: id, kind: .upload, descriptor: -1, offset: 0)
            state.withLock { $0.running[id] = running }
            let session = runner.session(for: record.spec)
            // Known to the server already: it says how much it has, the rest follows.
            if record.uploadResume != nil {
                logger.notice("task \(record.spec.task) of \(record.session): the upload goes on at its resumption URL (HEAD for the offset, PATCH of the rest)")
            }
            let task =
                record.uploadResume.map { session.uploadTask(withResumeData: $0, originalRequest: request) }
                ?? session.uploadTask(with: request, fromFile: URL(fileURLWithPath: body))
            running.start(task, runner: runner)
        }
    }

    /// A running upload's server named its resumption URL: kept in the journal.
    /// In order with the transfer's end (`fromTransfer`), which must not overtake it.
    func uploadResumable(_ id: Int64, _ blob: Data) {
        fromTransfer { [self] in
            guard state.withLock({ $0.running[id] }) != nil else { return }
            change(id: id) { record in
                record.uploadResume = blob
                return []
            }
        }
    }

    /// The final head of a running transfer arrived (from the delegate's
    /// call, which the transfer's body waits for): whether its body is
    /// wanted, decided on `owner` without holding one of Swift's few
    /// cooperative threads meanwhile.
    ///
    /// - Parameter asArrived: The head as the server sent it (fields in
    ///   order, the reason phrase), which the journal keeps for the app.
    func headArrived(_ id: Int64, _ response: HTTPURLResponse, asArrived: HTTPResponse? = nil) async -> Bool {
        let head = Self.spec(of: response, asArrived: asArrived)
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            owner.async { [self] in
                continuation.resume(returning: turn { decide(id, on: head) })
            }
        }
    }

    /// Whether a running transfer's body is wanted after `head`; within a
    /// turn on `owner`, whose commit journals the head before the body goes on.
    func decide(_ id: Int64, on head: ResponseSpec) -> Bool {
        guard let running = state.withLock({ $0.running[id] }), !running.isStopped else { return false }
        var wanted = true
        change(id: id) { record in
            let validator = head.field("ETag") ?? head.field("Last-Modified")
            record.response = head
            let status = head.status
            if status == 429 || status == 503 {
                // Busy: retried (Retry-After honoured) while attempts are left.
                running.retry = .busy(status: status, after: head.field("Retry-After").flatMap(Self.retryAfter))
                wanted = false
                return []
            }
            // An upload's answer is kept for the app; its body was sent whole.
            guard running.kind == .download else { return [] }
            var actions = record.machine.headReceived(status: status, validator: validator)
            if status == 206, let start = Self.rangeStart(head), start != record.machine.bytes {
                // A range other than the one asked for: start over.
                actions = [.truncateFile]
                record.machine = BackgroundTransferMachine(
                    phase: record.machine.phase, bytes: 0, validator: nil, attempts: record.machine.attempts)
                running.retry = .wrongRange
                wanted = false
            }
            let length = head.contentLength
            record.expected = length >= 0 ? record.machine.bytes.addingReportingOverflow(length).partialValue : -1
            running.restart(at: record.machine.bytes, expected: record.expected)
            return actions
        }
        return wanted
    }

    /// A transfer ended (on its context) with `bytes` in its closed file
    /// (downloads) or sent (uploads): the machine hears how, on `owner`.
    func transferEnded(_ id: Int64, bytes: Int64, error: (any Error)?, body: Data?) {
        fromTransfer { [self] in
            guard let running = state.withLock({ $0.running.removeValue(forKey: id) }) else { return }
            change(id: id) { record in
                if running.kind == .upload { record.responseBody = body }
                record.machine.noteBytes(bytes)
                switch running.retry {
                case .busy(let status, let after):
                    // If it was the last try, this is the task's error.
                    record.errorCode = SessionError.Code.resourceUnavailable.description
                    record.errorMessage = "the server was busy (HTTP \(status)) at every try"
                    let actions = record.machine.failed(
                        reason: "the server was busy (HTTP \(status))", retryable: true, retryAfter: after, now: Date(),
                        firstDelay: settings.firstRetryDelay)
                    if !record.machine.isFinished { record.errorCode = nil; record.errorMessage = nil }
                    return actions
                case .wrongRange:
                    return record.machine.failed(reason: "the server sent another range", retryable: true, retryAfter: 0, now: Date())
                case nil:
                    break
                }
                guard let error else {
                    if record.spec.kind == .download { rename(partialFile(id), finishedFile(id)) }
                    return record.machine.completed(status: record.response?.status ?? 0)
                }
                let failure = (error as? URLError)?.sessionError ?? SessionError(.unknown, failingURL: nil, message: "\(error)")
                if let blob = (error as? URLError)?.uploadTaskResumeData { record.uploadResume = blob }
                if failure.code == .cannotDecodeResumeData, record.uploadResume != nil {
                    // The resume data no longer fits the body: the whole upload, at once.
                    logger.warning("task \(record.spec.task) of \(record.session): \(failure.message); sending the whole body")
                    record.uploadResume = nil
                    return record.machine.failed(reason: failure.message, retryable: true, retryAfter: 0, now: Date())
                }
                record.errorCode = failure.code.description
                record.errorMessage = failure.message
                let actions = record.machine.failed(
                    reason: failure.message, retryable: Self.isRetryable(failure.code), retryAfter: nil, now: Date(),
                    firstDelay: settings.firstRetryDelay)
                if !record.machine.isFinished { record.errorCode = nil; record.errorMessage = nil }
                return actions
            }
        }
    }

    static func isRetryable(_ code: SessionError.Code) -> Bool {
        [.timedOut, .cannotFindHost, .cannotConnectToHost, .networkConnectionLost, .badServerResponse].contains(code)
    }

    static func spec(of response: HTTPURLResponse, asArrived: HTTPResponse? = nil) -> ResponseSpec {
        let url = response.url?.absoluteString ?? ""
        if let asArrived, asArrived.status.code == response.statusCode {
            // Wire order, every repeated field its own, the server's reason phrase.
            let headers = asArrived.headerFields.map { [$0.name.rawName, $0.value] }
            return ResponseSpec(
                url: url, status: response.statusCode, httpVersion: "HTTP/1.1", headers: headers, reasonPhrase: asArrived.status.reasonPhrase)
        }
        let headers = response.allHeaderFields.compactMap { key, value -> [String]? in
            guard let name = key as? String, let text = value as? String else { return nil }
            return [name, text]
        }.sorted { $0[0] < $1[0] }
        return ResponseSpec(url: url, status: response.statusCode, httpVersion: "HTTP/1.1", headers: headers)
    }

    /// Retry-After as seconds or an HTTP date (RFC 9110 §10.2.3).
    static func retryAfter(_ value: String) -> TimeInterval? {
        if let seconds = Int(value.trimmingCharacters(in: .whitespaces)), seconds >= 0 { return TimeInterval(seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: value).map { max(0, $0.timeIntervalSinceNow) }
    }

    /// The first byte's offset in a 206's Content-Range ("bytes 100-199/200").
    static func rangeStart(_ head: ResponseSpec) -> Int64? {
        guard let value = head.field("Content-Range"), value.lowercased().hasPrefix("bytes ") else { return nil }
        let range = value.dropFirst(6).prefix { $0 != "-" }
        return Int64(range.trimmingCharacters(in: .whitespaces))
    }

    // MARK: Launch events

    /// Launches of a session's app that never attached, before transferd
    /// stops launching it (until it attaches on its own).
    package static let maximumLaunches = 3

    /// Runs the command a session registered when events wait and no app
    /// is attached: once per batch of events, at most
    /// `maximumLaunches` times until the app attaches, `launchRetryDelay`
    /// apart; each launch is written in the journal before it runs, so a
    /// restarted transferd does not launch again at once.
    func launchApp(of session: String) {
        guard client(of: session) == nil, hasWaitingEvents(session) else { return }
        let launch: Journal.LaunchState
        do {
            launch = try journal.launchState(session: session)
        } catch {
            logger.error("cannot read the launch command of \(session): \(error)")
            return
        }
        guard let command = launch.command, let program = command.first, program.hasPrefix("/") else {
            if state.withLock({ $0.gaveUpLaunching.insert(session).inserted }) {
                logger.info("events of \(session) wait for its app, which named no launch command: nothing is launched")
            }
            return
        }
        if let last = launch.launched {
            let wait = settings.launchRetryDelay - Date().timeIntervalSince(last)
            if wait > 0 {
                scheduleLaunchCheck(session, after: wait)
                return
            }
        }
        guard launch.launches < Self.maximumLaunches else {
            if state.withLock({ $0.gaveUpLaunching.insert(session).inserted }) {
                logger.warning("the app of \(session) was launched \(launch.launches) times and never attached: not launched again until it attaches")
            }
            return
        }
        do {
            try journal.recordLaunch(session: session, at: Date())
        } catch {
            logger.error("cannot record a launch of the app of \(session), so it is not launched: \(error)")
            return
        }
        var environment = ProcessInfo.processInfo.environment
        environment["URLLOADING_BACKGROUND_SESSION"] = session
        // Its output joins transferd's log: a relaunched app has no terminal.
        do {
            let pid = try DetachedProcess.start(command, environment: environment, log: paths.log)
            logger.info("launched the app of \(session) for its events (pid \(pid))")
        } catch {
            logger.error("cannot launch the app of \(session): \(error)")
        }
        // An app that exits without attaching is launched again, within the bound.
        scheduleLaunchCheck(session, after: settings.launchRetryDelay)
    }

    /// Events (finished tasks) or questions wait for the session's app.
    private func hasWaitingEvents(_ session: String) -> Bool {
        state.withLock { state in
            state.records.values.contains { record in
                guard record.session == session else { return false }
                if case .finished = record.machine.phase { return true }
                return record.machine.phase == .askingToBegin
            } || state.challenges.values.contains { $0.session == session }
        }
    }

    /// Looks again at `session` after `delay`, once however many ask.
    private func scheduleLaunchCheck(_ session: String, after delay: TimeInterval) {
        guard state.withLock({ $0.launchChecks.insert(session).inserted }) else { return }
        owner.asyncAfter(deadline: .now() + max(0, delay)) { [self] in
            _ = state.withLock { $0.launchChecks.remove(session) }
            launchApp(of: session)
        }
    }
}
