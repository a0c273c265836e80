import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import CoreMetrics
import InMemoryTracing
import Locking
import MetricsTestKit
import TestSupport
import Tracing
@testable import URLLoading

// urlloading-test-helper background-app <identifier> download <url>
// urlloading-test-helper background-app <identifier> upload <url> <file>
// urlloading-test-helper background-app <identifier> data <url>
// urlloading-test-helper background-app <identifier> attach
// urlloading-test-helper background-app <identifier> cancel-all
//     The app of a background session. Prints one line per event:
//     "attached tasks <n> pending <m>" or "startup-error <code>", "created <task>",
//     "write <total> <expected>", "finished <task> <size> <sha256>",
//     "body <text>", "complete <task> nil|<code>", "file-gone <true|false>",
//     "events-done", then "bye" once the session is invalid. download and
//     upload exit after their task completes; attach after the events that
//     waited (at once when none did) and every task it adopted completed.
//     Options after the identifier: "--output FILE" appends the lines to FILE
//     instead; "--launch-to FILE" registers "background-app <identifier>
//     attach --output FILE" as the launch command (without it the session
//     sends no launch events); "--launch-exit FILE" registers a command
//     that appends "launched" to FILE and exits. "--begin-after SECONDS" sets the new task's
//     earliestBeginDate that far ahead; "--begin-answer continue|cancel|new:URL"
//     is the delegate's answer to willBeginDelayedRequest, which prints
//     "asked-begin <task> <seconds since resume>". "--challenge-answer
//     USER:PASSWORD" is the delegate's credential for a challenge not failed
//     before (else default handling); each challenge prints
//     "challenge <task> <realm> <previous failures>". "--header NAME:VALUE"
//     (repeatable) adds a field to a download's request. "--metrics"
//     bootstraps swift-metrics' test backend and prints, before "bye",
//     "queue <values>": what the session's gauge of transferd's unfinished
//     tasks recorded, in order. "--proxy URL" sets the configuration's
//     proxyURL; "--trust-roots PEM" its trustRootsFile; "--no-resumable-upload"
//     sets resumableUploadVersion to nil; "--tls-max 1.2" the
//     configuration's tlsMaximumSupportedVersion; "--timeout SECONDS" (inf
//     and nan too) a download request's timeoutInterval; "--no-cookies" its
//     httpShouldSetCookies to false; "--count N" makes a download N
//     download tasks of the URL at once. "--trace"
//     bootstraps a tracer (swift-distributed-tracing's in-memory one,
//     propagating W3C traceparent) and prints, before "bye", "span <name>
//     <status attribute> <traceparent>" for each span ended.

/// Where the lines go: standard output unless `--output` said a file.
nonisolated(unsafe) var sayTo = FileHandle.standardOutput

/// Prints a line at once (the test reads them as they come).
func say(_ line: String) {
    sayTo.write(Data((line + "\n").utf8))
}

final class BackgroundAppDelegate: SessionDownloadDelegate, SessionDataDelegate {
    /// Tasks still to complete, tasks completed (events may arrive before
    /// `expect` names them), and whether the waiting events were all delivered.
    private let state = Lock<(open: Set<Int>, completed: Set<Int>, lastFile: String?, eventsDone: Bool, waitsForEvents: Bool)>(
        ([], [], nil, false, false))
    private let done = DispatchSemaphore(value: 0)
    private let invalid = DispatchSemaphore(value: 0)
    /// The credential the delegate gives a challenge, if any.
    let challengeAnswer = Lock<(user: String, password: String)?>(nil)
    /// The answer to willBeginDelayedRequest, and when the task was resumed.
    let beginAnswer = Lock<(disposition: Session.DelayedRequestDisposition, resumed: Date, replacement: URL?)>((.continueLoading, Date(), nil))

    func expect(_ tasks: [Int], events: Bool) {
        state.withLock {
            $0.open.formUnion(Set(tasks).subtracting($0.completed))
            $0.waitsForEvents = events
        }
        checkDone()
    }

    private func checkDone() {
        let finished = state.withLock { $0.open.isEmpty && ($0.eventsDone || !$0.waitsForEvents) }
        if finished { done.signal() }
    }

    /// Bounded: a helper that hears nothing says so and exits non-zero.
    func waitUntilDone() {
        if done.wait(timeout: .now() + 240) == .timedOut { fail("no completion or events within 240 s") }
    }
    func waitUntilInvalid() {
        if invalid.wait(timeout: .now() + 60) == .timedOut { fail("the session did not become invalid within 60 s") }
    }

    func urlSession(_ session: Session, downloadTask: SessionTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        say("write \(totalBytesWritten) \(totalBytesExpectedToWrite)")
    }

    func urlSession(_ session: Session, downloadTask: SessionTask, didFinishDownloadingTo location: URL) {
        let data = (try? Data(contentsOf: location)) ?? Data()
        state.withLock { $0.lastFile = location.path }
        say("finished \(downloadTask.taskIdentifier) \(data.count) \(SHA256.hash(data).map { String(format: "%02x", $0) }.joined())")
    }

    func urlSession(_ session: Session, task: SessionTask, willBeginDelayedRequest request: URLRequest) async
        -> (Session.DelayedRequestDisposition, URLRequest?)
    {
        let (disposition, resumed, replacement) = beginAnswer.withLock { ($0.disposition, $0.resumed, $0.replacement) }
        say("asked-begin \(task.taskIdentifier) \(String(format: "%.2f", Date().timeIntervalSince(resumed)))")
        return (disposition, replacement.map { URLRequest(url: $0) })
    }

    func urlSession(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge) async
        -> (Session.AuthChallengeDisposition, Credential?)
    {
        say("challenge \(task.taskIdentifier) \(challenge.protectionSpace.realm ?? "-") \(challenge.previousFailureCount)")
        guard let answer = challengeAnswer.withLock({ $0 }), challenge.previousFailureCount == 0 else { return (.performDefaultHandling, nil) }
        return (.useCredential, Credential(user: answer.user, password: answer.password, persistence: .none))
    }

    func urlSession(_ session: Session, dataTask: SessionTask, didReceive data: Data) {
        say("body \(String(decoding: data, as: UTF8.self))")
    }

    func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
        let code = (error as? URLError)?.sessionError.map { "\($0.code)".replacingOccurrences(of: " ", with: "-") } ?? (error.map { "\($0)" } ?? "nil")
        let file = state.withLock { state -> String? in
            defer { state.lastFile = nil }
            return state.lastFile
        }
        if let file { say("file-gone \(!FileManager.default.fileExists(atPath: file))") }
        if let head = task.httpResponse, head.status.code != 200 {
            // The head as the server sent it: the reason phrase, each Set-Cookie its own.
            say("head \(head.status.reasonPhrase) \(head.headerFields[values: .setCookie].joined(separator: ";"))")
        }
        if let error, code == "background-session-was-disconnected" { say("why \(task.taskIdentifier) \(error)") }
        say("complete \(task.taskIdentifier) \(code) status \((task.response as? HTTPURLResponse)?.statusCode ?? 0)")
        state.withLock {
            _ = $0.open.remove(task.taskIdentifier)
            $0.completed.insert(task.taskIdentifier)
        }
        checkDone()
    }

    func urlSessionDidFinishEvents(forBackgroundURLSession session: Session) {
        say("events-done")
        state.withLock { $0.eventsDone = true }
        checkDone()
    }

    func urlSession(_ session: Session, didBecomeInvalidWithError error: (any Error)?) {
        invalid.signal()
    }
}

/// A semaphore signalled when `number` arrives (the signal's default action is off).
func waitForSignal(_ number: Int32) -> DispatchSemaphore {
    let arrived = DispatchSemaphore(value: 0)
    signal(number, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
    source.setEventHandler { arrived.signal() }
    source.resume()
    // Lives as long as the process.
    _ = Unmanaged.passRetained(source as AnyObject)
    return arrived
}

func runBackgroundApp(_ given: [String]) -> Never {
    var arguments = given
    let configuration = SessionConfiguration.background(withIdentifier: given.first ?? "")
    configuration.sessionSendsLaunchEvents = false
    // Gated bodies wait for the test (an app killed, transferd killed) while
    // a whole suite under a sanitizer runs beside them: a stall past the
    // default 60 s once made transferd retry with a Range (a 206 where the
    // test expects the first answer). Tests of retries use failures, not silence.
    configuration.timeoutIntervalForRequest = 600
    if let at = arguments.firstIndex(of: "--output"), at + 1 < arguments.count {
        let path = arguments[at + 1]
        guard FileManager.default.fileExists(atPath: path) || FileManager.default.createFile(atPath: path, contents: nil),
            let handle = FileHandle(forWritingAtPath: path)
        else { fail("cannot write \(path)") }
        handle.seekToEndOfFile()
        sayTo = handle
        arguments.removeSubrange(at...(at + 1))
    }
    if let at = arguments.firstIndex(of: "--launch-exit"), at + 1 < arguments.count {
        // A launch command that never attaches: it notes each launch and exits.
        configuration.sessionSendsLaunchEvents = true
        configuration.launchCommand = ["/bin/sh", "-c", "echo launched >> \"$0\"", arguments[at + 1]]
        arguments.removeSubrange(at...(at + 1))
    }
    if let at = arguments.firstIndex(of: "--launch-events") {
        // Launch events asked for, with no launch command named.
        configuration.sessionSendsLaunchEvents = true
        arguments.remove(at: at)
    }
    if let at = arguments.firstIndex(of: "--launch-to"), at + 1 < arguments.count {
        configuration.sessionSendsLaunchEvents = true
        configuration.launchCommand = [URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path, "background-app", given[0], "attach", "--output", arguments[at + 1]]
        arguments.removeSubrange(at...(at + 1))
    }
    var beginAfter: TimeInterval?
    if let at = arguments.firstIndex(of: "--begin-after"), at + 1 < arguments.count {
        guard let seconds = TimeInterval(arguments[at + 1]), seconds.isFinite, seconds >= 0 else { fail("--begin-after SECONDS") }
        beginAfter = seconds
        arguments.removeSubrange(at...(at + 1))
    }
    // Resume only when the test sends SIGUSR1 (it stops transferd first).
    var resumeSignal: DispatchSemaphore?
    if let at = arguments.firstIndex(of: "--resume-on-signal") {
        resumeSignal = waitForSignal(SIGUSR1)
        arguments.remove(at: at)
    }
    var metrics: TestMetrics?
    if let at = arguments.firstIndex(of: "--metrics") {
        let backend = TestMetrics()
        MetricsSystem.bootstrap(backend)
        metrics = backend
        arguments.remove(at: at)
    }
    var tracer: TestW3CTracer?
    if let at = arguments.firstIndex(of: "--trace") {
        let bootstrapped = TestW3CTracer()
        InstrumentationSystem.bootstrap(bootstrapped)
        tracer = bootstrapped
        arguments.remove(at: at)
    }
    let delegate = BackgroundAppDelegate()
    if let at = arguments.firstIndex(of: "--begin-answer"), at + 1 < arguments.count {
        let answer = arguments[at + 1]
        if answer.hasPrefix("new:"), let url = URL(string: String(answer.dropFirst(4))) {
            delegate.beginAnswer.withLock {
                $0.disposition = .useNewRequest
                $0.replacement = url
            }
        } else {
            guard answer == "continue" || answer == "cancel" else { fail("--begin-answer continue|cancel|new:URL") }
            delegate.beginAnswer.withLock { $0.disposition = answer == "cancel" ? .cancel : .continueLoading }
        }
        arguments.removeSubrange(at...(at + 1))
    }
    if let at = arguments.firstIndex(of: "--challenge-answer"), at + 1 < arguments.count {
        let parts = arguments[at + 1].split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { fail("--challenge-answer USER:PASSWORD") }
        delegate.challengeAnswer.withLock { $0 = (parts[0], parts[1]) }
        arguments.removeSubrange(at...(at + 1))
    }
    var headers: [(String, String)] = []
    while let at = arguments.firstIndex(of: "--header"), at + 1 < arguments.count {
        let parts = arguments[at + 1].split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { fail("--header NAME:VALUE") }
        headers.append((parts[0], parts[1].trimmingCharacters(in: .whitespaces)))
        arguments.removeSubrange(at...(at + 1))
    }
    var timeout: TimeInterval?
    if let at = arguments.firstIndex(of: "--timeout"), at + 1 < arguments.count {
        guard let value = TimeInterval(arguments[at + 1]) else { fail("--timeout SECONDS") }
        timeout = value
        arguments.removeSubrange(at...(at + 1))
    }
    var count = 1
    if let at = arguments.firstIndex(of: "--count"), at + 1 < arguments.count {
        guard let value = Int(arguments[at + 1]), (1...200).contains(value) else { fail("--count 1...200") }
        count = value
        arguments.removeSubrange(at...(at + 1))
    }
    if let at = arguments.firstIndex(of: "--no-cookies") {
        configuration.httpShouldSetCookies = false
        arguments.remove(at: at)
    }
    if let at = arguments.firstIndex(of: "--trust-roots"), at + 1 < arguments.count {
        configuration.trustRootsFile = arguments[at + 1]
        arguments.removeSubrange(at...(at + 1))
    }
    if let at = arguments.firstIndex(of: "--tls-max"), at + 1 < arguments.count {
        let parts = arguments[at + 1].split(separator: ".").compactMap { Int($0) }
        guard parts.count == 2 else { fail("--tls-max MAJOR.MINOR") }
        configuration.tlsMaximumSupportedVersion = (parts[0], parts[1])
        arguments.removeSubrange(at...(at + 1))
    }
    if let at = arguments.firstIndex(of: "--no-resumable-upload") {
        configuration.resumableUploadVersion = nil
        arguments.remove(at: at)
    }
    if let at = arguments.firstIndex(of: "--proxy"), at + 1 < arguments.count {
        guard let proxy = URL(string: arguments[at + 1]) else { fail("--proxy URL") }
        configuration.proxyURL = proxy
        arguments.removeSubrange(at...(at + 1))
    }
    guard arguments.count >= 2 else { fail("usage: background-app <identifier> download|upload|data|attach ...") }
    let session = Session(configuration: configuration, delegate: delegate)
    if let launched = Session.launchedForBackgroundSession { say("launched-for \(launched)") }
    for error in session.startupErrors {
        say("startup-error \((error as? SessionError).map { "\($0.code)".replacingOccurrences(of: " ", with: "-") } ?? "\(error)")")
        say("startup-error-message \(error)")
    }
    let adopted = session.allTasks.map(\.taskIdentifier)
    let pending = (session.remote as? BackgroundHost)?.pendingEvents ?? 0
    say("attached tasks \(adopted.count) pending \(pending)")
    let rest = Array(arguments.dropFirst(2))
    var task: SessionTask?
    var others: [SessionTask] = []
    switch arguments[1] {
    case "download":
        guard let url = rest.first.flatMap(URL.init(string:)) else { fail("download <url>") }
        var request = URLRequest(url: url)
        for (name, value) in headers { request.addValue(value, forHTTPHeaderField: name) }
        if let timeout { request.timeoutInterval = timeout }
        task = session.downloadTask(with: request)
        others = (1..<count).map { _ in session.downloadTask(with: request) }
    case "upload":
        guard rest.count == 2, let url = URL(string: rest[0]) else { fail("upload <url> <file>") }
        var request = URLRequest(url: url)
        request.httpMethod = "PUT"
        task = session.uploadTask(with: request, fromFile: URL(fileURLWithPath: rest[1]))
    case "data":
        guard let url = rest.first.flatMap(URL.init(string:)) else { fail("data <url>") }
        task = session.dataTask(with: URLRequest(url: url))
    case "attach":
        break
    case "cancel-all":
        // Apple's way to reach a re-attached session's tasks.
        let listed = DispatchSemaphore(value: 0)
        session.getAllTasks { tasks in
            say("listed \(tasks.map { "\($0.taskIdentifier):\($0.state)" }.sorted().joined(separator: " "))")
            delegate.expect(tasks.map(\.taskIdentifier), events: false)
            for task in tasks { task.cancel() }
            listed.signal()
        }
        if listed.wait(timeout: .now() + 30) == .timedOut { fail("getAllTasks did not answer within 30 s") }
    default:
        fail("unknown background-app command \(arguments[1])")
    }
    if arguments[1] == "cancel-all" {
        // expected above
    } else if let task {
        say("created \(task.taskIdentifier)")
        delegate.expect([task.taskIdentifier], events: false)
        if let beginAfter { task.earliestBeginDate = Date().addingTimeInterval(beginAfter) }
        if let resumeSignal, resumeSignal.wait(timeout: .now() + 60) == .timedOut { fail("no SIGUSR1 within 60 s") }
        delegate.beginAnswer.withLock { $0.resumed = Date() }
        task.resume()
        // transferd has the task now (the messages are in its socket).
        say("resumed \(task.taskIdentifier)")
        for other in others {
            delegate.expect([other.taskIdentifier], events: false)
            other.resume()
            say("resumed \(other.taskIdentifier)")
        }
    } else {
        delegate.expect(adopted, events: pending > 0)
    }
    delegate.waitUntilDone()
    session.finishTasksAndInvalidate()
    delegate.waitUntilInvalid()
    if let metrics {
        let gauge = try? metrics.expectGauge("urlloading_background_tasks", [("session", given[0])])
        say("queue " + (gauge?.values.map { "\(Int($0))" }.joined(separator: " ") ?? "none"))
    }
    for span in tracer?.memory.finishedSpans ?? [] {
        let status = span.attributes["http.response.status_code"].map { "\($0.toSpanAttribute())" } ?? "none"
        say("span \(span.operationName) \(status) 00-\(span.traceID)-\(span.spanID)-01")
    }
    say("bye")
    exit(0)
}

// urlloading-test-helper connect-as <uid> <socket>
//     Becomes user <uid> (the test runs as root), connects to transferd's
//     socket and asks to attach; prints "answered" when transferd answers,
//     "closed" when it closes the connection without a word.
func connectAs(_ arguments: [String]) -> Never {
    guard arguments.count == 2, let uid = UInt32(arguments[0]) else { fail("connect-as <uid> <socket>") }
    guard setgroups(0, nil) == 0, setgid(uid) == 0, setuid(uid) == 0 else { fail("cannot become uid \(uid): \(String(cString: strerror(errno)))") }
    do {
        let socket = try UnixSocket.connect(path: arguments[1])
        do {
            try socket.send(.attach(Attachment(identifier: "intruder", processID: getpid(), launchCommand: nil)))
        } catch {
            // Closed before the request was written.
            say("closed")
            exit(0)
        }
        guard socket.waitReadable(seconds: 10) else { fail("transferd neither answered nor closed within 10 s") }
        var framing = BackgroundFraming()
        say((try? socket.receive(&framing)).flatMap { $0 } == nil ? "closed" : "answered")
    } catch {
        say("cannot connect: \(error)")
    }
    exit(0)
}
