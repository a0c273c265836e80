import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import Transport
@testable import URLLoading

/// A task's state machine with events and actions only: no socket, no
/// thread. Its hops hang on a task that is never resumed (a hop is the
/// transport's observer for a task); which hop's events reach the machine is
/// the task's entries' part (`EngineScriptTests`' late hop).
@Suite struct TaskStateMachineTests {
    typealias Machine = SessionTask.StateMachine
    /// The first hop of every machine here.
    static let first = Hop(task: EngineHarness().task("/machine").0, index: 0)
    static let id = CurlMulti.TransferID(1)
    static let other = CurlMulti.TransferID(2)
    static let head = ResponseHead(status: 200, httpVersion: "HTTP/1.1", headers: [("Content-Length", "2")])
    static let url = URL(string: "http://example.test/")
    static let request = URLRequest(url: URL(string: "http://example.test/first") ?? URL(fileURLWithPath: "/"))

    /// A machine whose first hop's head is being decided.
    static func deciding() -> Machine {
        var machine = Machine()
        _ = machine.resume()
        _ = machine.proceed(with: Self.first, request: Self.request)
        _ = machine.started(id)
        _ = machine.head(head)
        return machine
    }

    @Test("An event's actions are kept in order, two at most; a third one is reported as impossible, never lost silently")
    func actionsInline() {
        var actions = Machine.Actions()
        #expect(actions.isEmpty && actions.count == 0)
        actions.append(.cancelTransfer(Self.id))
        actions.append(.startTransfer(Self.first))
        #expect(Array(actions) == [.cancelTransfer(Self.id), .startTransfer(Self.first)])
        #expect(actions == [.cancelTransfer(Self.id), .startTransfer(Self.first)] && actions != [.cancelTransfer(Self.id)])
        actions.append(.runInterceptors)
        #expect(actions.count == 2 && actions[0] == .cancelTransfer(Self.id))
        guard case .impossible(let what) = actions[1] else {
            Issue.record("a third action replaced the second without a word: \(actions[1])")
            return
        }
        #expect(what.contains("runInterceptors") && what.contains("startTransfer"))
        #expect(Machine.Actions(.awaitBeginDate) == [.awaitBeginDate])
    }

    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("A delayed task waits for its begin date, then goes on to the interceptors; a cancel while it waits ends it")
    func delayedBegin() {
        var machine = Machine()
        #expect(machine.resume(at: Self.t0, earliestBegin: Self.t0.addingTimeInterval(60)) == [.awaitBeginDate])
        #expect(machine.phase == .delayed && !machine.isSuspended)
        #expect(machine.resume(at: Self.t0.addingTimeInterval(1), earliestBegin: Self.t0.addingTimeInterval(60)).isEmpty, "a second resume changes nothing")
        #expect(machine.proceed(with: Self.first, request: Self.request).first.map { if case .impossible = $0 { true } else { false } } == true)
        #expect(machine.beginDelayed() == [.runInterceptors] && machine.phase == .intercepting)
        #expect(machine.beginDelayed().first.map { if case .impossible = $0 { true } else { false } } == true)
        var past = Machine()
        #expect(past.resume(at: Self.t0, earliestBegin: Self.t0.addingTimeInterval(-1)) == [.runInterceptors], "a begin date gone by delays nothing")
        var cancelled = Machine()
        _ = cancelled.resume(at: Self.t0, earliestBegin: Self.t0.addingTimeInterval(60))
        _ = cancelled.cancel()
        #expect(cancelled.outcome?.isCancelled == true && cancelled.beginDelayed().isEmpty)
    }

    @Test("The life of a plain exchange: resume, interceptors, transfer, head, body, end")
    func plainExchange() {
        var machine = Machine()
        #expect(machine.isSuspended && machine.phase == .suspended)
        let r1 = machine.resume()
        #expect(r1 == [.runInterceptors])
        let r2 = machine.resume()
        #expect(r2 == [])
        let r3 = machine.proceed(with: Self.first, request: Self.request)
        #expect(r3 == [.startTransfer(Self.first)])
        let r4 = machine.started(Self.id)
        #expect(r4 == [])
        let r5 = machine.chunk()
        #expect(r5 == false, "no body before the head is decided")
        let r6 = machine.head(Self.head)
        #expect(r6 == [.decide(Self.head, Self.first)])
        let r7 = machine.allow()
        #expect(r7 == [.unpause(Self.id)], "the refused chunk is asked for again")
        let r8 = machine.chunk()
        #expect(r8)
        let r9 = machine.transferCompleted(.success(TransferMetrics()))
        #expect(r9 == [.complete(.success(TransferMetrics()))])
        #expect(machine.isFinished)
    }

    @Test("A transfer that ends while its head is decided completes when the decision comes")
    func completionWaitsForDecision() {
        var machine = Self.deciding()
        let r10 = machine.transferCompleted(.success(TransferMetrics()))
        #expect(r10 == [])
        #expect(!machine.isFinished)
        let r11 = machine.allow()
        #expect(r11 == [.complete(.success(TransferMetrics()))])
    }

    @Test("Cancel in every phase: the transfer is cancelled once, the task completes once with cancelled")
    func cancelEverywhere() {
        let cancelled = SessionError(.cancelled, failingURL: nil, message: "the task was cancelled")
        var initial = Machine()
        let r12 = initial.cancel()
        #expect(r12 == [.complete(.failure(cancelled))])
        let r13 = initial.cancel()
        let r14 = initial.resume()
        #expect(r13 == [] && r14 == [])
        var deciding = Self.deciding()
        let r15 = deciding.cancel()
        let cancelledAtRequest = SessionError(.cancelled, failingURL: Self.request.url, message: "the task was cancelled")
        #expect(r15 == [.cancelTransfer(Self.id), .complete(.failure(cancelledAtRequest))])
        // Late events after the end change nothing and are not impossible.
        let r16 = deciding.allow()
        let r17 = deciding.head(Self.head)
        #expect(r16 == [] && r17 == [])
        let r18 = deciding.transferCompleted(.failure(.cancelled))
        #expect(r18 == [])
        let r19 = deciding.started(Self.other)
        #expect(r19 == [.cancelTransfer(Self.other)])
        #expect(!deciding.isCurrent(Self.first) && deciding.hop == nil, "a finished task has no current hop (nor holds one)")
    }

    @Test("Following a redirect or a challenge moves to a new hop object after the old one; the old hop is no longer current")
    func follow() {
        var machine = Self.deciding()
        let r20 = machine.follow(.redirect, url: Self.url)
        guard let second = machine.hop else {
            Issue.record("no hop after a redirect")
            return
        }
        #expect(r20 == [.cancelTransfer(Self.id), .startTransfer(second)])
        #expect(second !== Self.first && second.index == 1 && second.task === Self.first.task && machine.redirects == 1)
        #expect(!machine.isCurrent(Self.first) && machine.isCurrent(second), "the old hop's events stop at the task's entries")
        #expect(machine.phase == .awaitingHead(Machine.Exchange()) && machine.record == Machine.HopRecord(), "nothing of the old hop is kept")
        let r24 = machine.started(Self.other)
        #expect(r24 == [])
        let r25 = machine.head(Self.head)
        #expect(r25 == [.decide(Self.head, second)] && r25 != [.decide(Self.head, Self.first)])
        let r26 = machine.follow(.authentication, url: Self.url)
        guard let third = machine.hop else {
            Issue.record("no hop after a challenge")
            return
        }
        #expect(r26 == [.cancelTransfer(Self.other), .startTransfer(third)] && third.index == 2 && third !== second)
        #expect(machine.redirects == 1, "a challenge is no redirect")
    }

    @Test("A failed transfer sent again (a resumable upload's resumption) is a new hop, the old one no longer current; the bound holds")
    func resend() {
        var machine = Machine()
        _ = machine.resume()
        _ = machine.proceed(with: Self.first, request: Self.request)
        _ = machine.started(Self.id)
        let resent = machine.resend(url: Self.url)
        guard let second = machine.hop else {
            Issue.record("no hop after a resend")
            return
        }
        #expect(resent == [.startTransfer(second)], "the failed transfer ended: nothing to cancel")
        #expect(second.index == 1 && !machine.isCurrent(Self.first) && machine.redirects == 0 && machine.authentications == 0)
        _ = machine.started(Self.other)
        #expect(machine.head(Self.head) == [.decide(Self.head, second)])
        let resumed = machine.follow(.resumption, url: Self.url)
        #expect(machine.hop?.index == 2 && resumed == [.cancelTransfer(Self.other), .startTransfer(machine.hop ?? second)])
        #expect(machine.redirects == 0 && machine.authentications == 0, "a resumption counts as neither")

        var suspended = Machine()
        guard case .impossible = suspended.resend(url: Self.url).first else {
            Issue.record("a task never resumed was sent again")
            return
        }
        var bounded = Machine()
        _ = bounded.resume()
        _ = bounded.proceed(with: Self.first, request: Self.request)
        var last = Machine.Actions()
        var hops = 1
        for _ in 0..<SessionTask.maximumHops {
            last = bounded.resend(url: Self.url)
            if bounded.isFinished { break }
            hops += 1
        }
        guard case .complete(.failure(let error)) = last.last else {
            Issue.record("resends are unbounded")
            return
        }
        #expect(error.code == .networkConnectionLost && hops == SessionTask.maximumHops)
    }

    @Test("The redirect limit and the one bound on all hops end the task with a clear error")
    func bounds() {
        var limited = Self.deciding()
        guard case .complete(.failure(let error)) = limited.follow(.redirect, url: Self.url, maximumRedirects: 0).last else {
            Issue.record("followed past the limit")
            return
        }
        #expect(error.code == .httpTooManyRedirects && limited.isFinished)
        var machine = Self.deciding()
        var last = Machine.Actions()
        var hops = 1
        for _ in 0..<SessionTask.maximumHops {
            last = machine.follow(.authentication, url: Self.url)
            if machine.isFinished { break }
            hops += 1
            _ = machine.head(Self.head)
        }
        guard case .complete(.failure(let bound)) = last.last else {
            Issue.record("no bound")
            return
        }
        #expect(bound.code == .userAuthenticationRequired && hops == SessionTask.maximumHops)
    }

    @Test("Events out of their phase are reported as impossible and change nothing")
    func impossibleEvents() {
        var machine = Machine()
        guard case .impossible = machine.allow().first else {
            Issue.record("allow before anything was not reported")
            return
        }
        guard case .impossible = machine.proceed(with: Self.first, request: Self.request).first else {
            Issue.record("proceed before resume was not reported")
            return
        }
        #expect(machine.phase == .suspended)
        var receiving = Self.deciding()
        _ = receiving.allow()
        guard case .impossible = receiving.head(Self.head).first else {
            Issue.record("a second head was not reported")
            return
        }
        #expect(receiving.phase == .receiving(Machine.Exchange(transfer: Self.id)))
    }

    @Test("Suspend holds body bytes; resume asks for them again; waits for connectivity count tries")
    func suspendAndRetries() {
        var machine = Self.deciding()
        _ = machine.allow()
        machine.suspend()
        let r27 = machine.chunk()
        #expect(r27 == false)
        let r28 = machine.resume()
        #expect(r28 == [.unpause(Self.id)])
        var waiting = Machine()
        _ = waiting.resume()
        _ = waiting.proceed(with: Self.first, request: Self.request)
        let r29 = waiting.retryForConnectivity()
        #expect(waiting.phase == .waiting(.connectivity))
        let again = waiting.proceedHop()
        #expect(again == [.startTransfer(Self.first)])
        let r30 = waiting.retryForConnectivity()
        #expect(r29 == 1 && r30 == 2)
        var deciding = Self.deciding()
        let r31 = deciding.retryForConnectivity()
        #expect(r31 == nil && deciding.phase == .deciding(Machine.Exchange(transfer: Self.id)), "a hop whose head came waits for nothing")
    }

    @Test("x-mixed-replace: the task completes only after every part's decision")
    func partDecisions() {
        var machine = Self.deciding()
        _ = machine.allow()
        machine.partDecisionOpened()
        let r32 = machine.transferCompleted(.success(TransferMetrics()))
        #expect(r32 == [])
        let r33 = machine.partDecisionClosed()
        #expect(r33 == [.complete(.success(TransferMetrics()))])
    }

    @Test("A hop waits for a body stream, the server's trust, a client certificate or another request, then starts; a cancel while waiting ends it")
    func waits() {
        for reason in [Machine.Wait.bodyStream, .serverTrust, .clientCertificate, .otherRequest] {
            var machine = Machine()
            _ = machine.resume()
            _ = machine.proceed(with: Self.first, request: Self.request)
            let waits = machine.wait(reason)
            #expect(waits && machine.phase == .waiting(reason))
            let again = machine.wait(reason)
            #expect(again == false, "already waiting")
            let go = machine.proceedHop()
            #expect(go == [.startTransfer(Self.first)])
            guard case .impossible = machine.proceedHop().first else {
                Issue.record("a second answer to one wait was not reported")
                return
            }
            var cancelled = Machine()
            _ = cancelled.resume()
            _ = cancelled.proceed(with: Self.first, request: Self.request)
            _ = cancelled.wait(reason)
            _ = cancelled.cancel()
            let late = cancelled.proceedHop()
            #expect(late == [] && cancelled.outcome?.isCancelled == true, "the answer after a cancel starts nothing")
        }
    }

    @Test("How a task ended: succeeded, failed, or cancelled by the user or the delegate; a failure names the request it failed at and carries resume data made after")
    func outcomes() {
        var succeeded = Self.deciding()
        _ = succeeded.allow()
        _ = succeeded.transferCompleted(.success(TransferMetrics()))
        #expect(succeeded.outcome == .succeeded && succeeded.succeeded && succeeded.error == nil)
        var failed = Self.deciding()
        let failedActions = failed.fail(SessionError(.badServerResponse, failingURL: nil, message: "x"))
        guard case .failed(let error)? = failed.outcome else {
            Issue.record("not failed: \(String(describing: failed.outcome))")
            return
        }
        #expect(error.code == .badServerResponse && error.failingURL == Self.request.url, "the failure names no URL")
        #expect(failedActions.last == .complete(.failure(error)), "the task completes with another error than it keeps")
        var elsewhere = Self.deciding()
        _ = elsewhere.fail(SessionError(.timedOut, failingURL: Self.url, message: "x"))
        #expect(elsewhere.error?.failingURL == Self.url, "a failure's own URL was replaced")
        var delegateCancelled = Self.deciding()
        _ = delegateCancelled.fail(SessionError(.cancelled, failingURL: nil, message: "the delegate cancelled the task"))
        #expect(delegateCancelled.outcome?.isCancelled == true && !delegateCancelled.succeeded)
        delegateCancelled.attachResumeData(Data("resume".utf8), resumesUpload: true)
        #expect(delegateCancelled.outcome?.isCancelled == true, "resume data changed how the task ended")
        #expect(delegateCancelled.error?.resumeData == Data("resume".utf8) && delegateCancelled.error?.resumesUpload == true)
        succeeded.attachResumeData(Data("resume".utf8), resumesUpload: false)
        #expect(succeeded.outcome == .succeeded, "a success got an error")
        #expect(Machine().outcome == nil && Machine().error == nil)
        var stream = Self.deciding()
        let handedOver = stream.becameStream()
        #expect(handedOver == [.cancelTransfer(Self.id), .complete(.success(nil))] && stream.outcome == .becameStream && stream.succeeded)
        #expect(stream.hop == nil && stream.becameStream().isEmpty)
        var receiving = Self.deciding()
        _ = receiving.allow()
        #expect(receiving.becameStream().first.map { if case .impossible = $0 { true } else { false } } == true, "a task past its head became a stream")
    }

    @Test("The task's request: the original, the interceptors', a redirect's, the delegate's replacement; it stays as it was once the task ends")
    func currentRequest() {
        var machine = Machine(request: URLRequest(url: URL(fileURLWithPath: "/original")))
        #expect(machine.request?.url?.path == "/original")
        _ = machine.resume()
        _ = machine.proceed(with: Self.first, request: Self.request)
        #expect(machine.request == Self.request)
        _ = machine.started(Self.id)
        _ = machine.head(Self.head)
        let redirected = URLRequest(url: URL(fileURLWithPath: "/redirected"))
        _ = machine.follow(.redirect, url: Self.url, to: redirected)
        #expect(machine.request == redirected)
        _ = machine.cancel()
        machine.use(URLRequest(url: URL(fileURLWithPath: "/late")))
        #expect(machine.request == redirected, "a finished task's request changed")
        #expect(machine.error?.failingURL == redirected.url)
        var delayed = Machine(request: Self.request)
        _ = delayed.resume(at: Self.t0, earliestBegin: Self.t0.addingTimeInterval(1))
        _ = delayed.beginDelayed(with: redirected)
        #expect(delayed.request == redirected)
    }

    @Test("Resume data: a timeout or a lost connection after bytes, or a cancel asking for it, when the response allowed resuming")
    func resumeDataDecision() {
        #expect(Machine.leavesResumeData(failure: .timedOut, askedForResumeData: false, resumable: true, bytesOnDisk: 1))
        #expect(Machine.leavesResumeData(failure: .networkConnectionLost, askedForResumeData: false, resumable: true, bytesOnDisk: 1))
        #expect(Machine.leavesResumeData(failure: .cancelled, askedForResumeData: true, resumable: true, bytesOnDisk: 1))
        #expect(!Machine.leavesResumeData(failure: .cancelled, askedForResumeData: false, resumable: true, bytesOnDisk: 1))
        #expect(!Machine.leavesResumeData(failure: .timedOut, askedForResumeData: false, resumable: false, bytesOnDisk: 1))
        #expect(!Machine.leavesResumeData(failure: .timedOut, askedForResumeData: false, resumable: true, bytesOnDisk: 0))
        #expect(!Machine.leavesResumeData(failure: .badServerResponse, askedForResumeData: true, resumable: true, bytesOnDisk: 1))
    }

    @Test("Redirects and authentications are counted apart")
    func counts() {
        var machine = Self.deciding()
        _ = machine.follow(.authentication, url: Self.url)
        _ = machine.head(Self.head)
        _ = machine.follow(.redirect, url: Self.url)
        _ = machine.head(Self.head)
        _ = machine.follow(.authentication, url: Self.url)
        #expect(machine.redirects == 1 && machine.authentications == 2 && machine.hop?.index == 3)
    }

    @Test("The transfer's id may come back after its head and first chunk: it is kept, and the refused chunk asked for again")
    func idAfterHead() {
        var machine = Machine()
        _ = machine.resume()
        _ = machine.proceed(with: Self.first, request: Self.request)
        let head = machine.head(Self.head)
        #expect(head == [.decide(Self.head, Self.first)], "the head came before the id")
        let early = machine.chunk()
        #expect(early == false)
        _ = machine.allow()
        let started = machine.started(Self.id)
        #expect(started == [.unpause(Self.id)], "the live transfer is kept, never cancelled")
        let second = machine.started(Self.other)
        #expect(second == [.cancelTransfer(Self.other)], "a second id for one hop is a stray transfer")
    }

    @Test("The deadline is the task's: set at the first resume from when it may begin, kept by later resumes; past it a connectivity retry is refused")
    func deadline() {
        var delayed = Machine()
        _ = delayed.resume(at: Self.t0, earliestBegin: Self.t0.addingTimeInterval(60), resourceTimeout: 10)
        #expect(delayed.deadline == Self.t0.addingTimeInterval(70), "the resource timeout counts from the begin date")
        var machine = Machine()
        _ = machine.resume(at: Self.t0, resourceTimeout: 10)
        machine.suspend()
        _ = machine.resume(at: Self.t0.addingTimeInterval(5), resourceTimeout: 30)
        #expect(machine.deadline == Self.t0.addingTimeInterval(10), "a second resume moved the deadline")
        #expect(machine.hasTime(at: Self.t0.addingTimeInterval(9.9)) && !machine.hasTime(at: Self.t0.addingTimeInterval(10)))
        _ = machine.proceed(with: Self.first, request: Self.request)
        let late = machine.retryForConnectivity(at: Self.t0.addingTimeInterval(11))
        #expect(late == nil && machine.phase == .awaitingHead(Machine.Exchange()), "a retry after the deadline")
        let inTime = machine.retryForConnectivity(at: Self.t0.addingTimeInterval(1))
        #expect(inTime == 1)
        var unbounded = Machine()
        _ = unbounded.resume(at: Self.t0, resourceTimeout: .infinity)
        #expect(unbounded.deadline == nil && unbounded.hasTime(at: .distantFuture))
    }

    @Test("A challenge answered: the next hop carries the credentials, also when it goes again after a wait; the hop after it carries nothing")
    func challengeRounds() {
        let credentials = SessionTask.SentAuthorization(
            space: AuthenticationStateTests.origin, credential: Credential(user: "ann", password: "pw", persistence: .none),
            fieldName: "Authorization", value: "Basic x")
        var machine = Self.deciding()
        #expect(machine.authentication.sent == nil)
        let answered = machine.answerChallenge(with: credentials, url: Self.url)
        #expect(answered.first == .cancelTransfer(Self.id), "the challenge's transfer goes on")
        guard answered.count == 2, case .startTransfer(let second) = answered[1] else {
            Issue.record("the answer started no hop: \(answered)")
            return
        }
        #expect(second !== Self.first && machine.authentication.sent?.space == credentials.space && machine.authentication.pending == nil)
        let waited = machine.retryForConnectivity()
        #expect(waited == 1)
        _ = machine.proceedHop()
        #expect(machine.isCurrent(second) && machine.authentication.sent?.space == credentials.space, "the hop went again without its credentials")
        _ = machine.head(Self.head)
        _ = machine.follow(.redirect, url: Self.url)
        #expect(machine.authentication.sent == nil && machine.authentications == 1)
        var receiving = Self.deciding()
        _ = receiving.allow()
        let outOfPhase = receiving.answerChallenge(with: credentials, url: Self.url)
        #expect(outOfPhase.first.map { if case .impossible = $0 { true } else { false } } == true)
        #expect(receiving.authentication.pending == nil, "credentials were queued for a hop that never comes")
    }

    @Test("A client certificate is asked for once per task, by a hop whose head has not come")
    func clientCertificateOnce() {
        var machine = Machine()
        _ = machine.resume()
        _ = machine.proceed(with: Self.first, request: Self.request)
        let asked = machine.waitForClientCertificate()
        #expect(asked && machine.phase == .waiting(.clientCertificate))
        _ = machine.proceedHop()
        let twice = machine.waitForClientCertificate()
        #expect(!twice, "asked twice")
        var given = Machine()
        _ = given.resume()
        _ = given.proceed(with: Self.first, request: Self.request)
        given.trust.use(Credential(certificatePath: "/c.pem", privateKeyPath: "/k.pem"))
        let withIdentity = given.waitForClientCertificate()
        #expect(!withIdentity && given.phase == .awaitingHead(Machine.Exchange()), "asked with an identity given")
        var deciding = Self.deciding()
        let pastHead = deciding.waitForClientCertificate()
        #expect(!pastHead && deciding.trust.mayAskForClientCertificate, "a hop past its head waited")
    }
}
