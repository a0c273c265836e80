import Foundation
import Testing
import Transport
@testable import URLLoading

/// A task's state machine with events and actions only: no socket, no
/// session, no thread.
@Suite struct TaskStateMachineTests {
    typealias Machine = SessionTask.StateMachine
    static let id = CurlMulti.TransferID(1)
    static let other = CurlMulti.TransferID(2)
    static let head = ResponseHead(status: 200, httpVersion: "HTTP/1.1", headers: [("Content-Length", "2")])
    static let url = URL(string: "http://example.test/")

    /// A machine whose first hop's head is being decided.
    static func deciding() -> Machine {
        var machine = Machine()
        _ = machine.resume()
        _ = machine.proceed()
        _ = machine.started(id, hop: 0)
        _ = machine.head(head, hop: 0)
        return machine
    }

    @Test("An event's actions are kept in order, two at most; a third one is reported as impossible, never lost silently")
    func actionsInline() {
        var actions = Machine.Actions()
        #expect(actions.isEmpty && actions.count == 0)
        actions.append(.cancelTransfer(Self.id))
        actions.append(.startTransfer(hop: 1))
        #expect(Array(actions) == [.cancelTransfer(Self.id), .startTransfer(hop: 1)])
        #expect(actions == [.cancelTransfer(Self.id), .startTransfer(hop: 1)] && actions != [.cancelTransfer(Self.id)])
        actions.append(.runInterceptors)
        #expect(actions.count == 2 && actions[0] == .cancelTransfer(Self.id))
        guard case .impossible(let what) = actions[1] else {
            Issue.record("a third action replaced the second without a word: \(actions[1])")
            return
        }
        #expect(what.contains("runInterceptors") && what.contains("startTransfer"))
        #expect(Machine.Actions(.awaitBeginDate) == [.awaitBeginDate])
    }

    @Test("A delayed task waits for its begin date, then goes on to the interceptors; a cancel while it waits ends it")
    func delayedBegin() {
        var machine = Machine()
        #expect(machine.resume(delayed: true) == [.awaitBeginDate])
        #expect(machine.phase == .delayed && !machine.isSuspended)
        #expect(machine.resume(delayed: true).isEmpty, "a second resume changes nothing")
        #expect(machine.proceed().first.map { if case .impossible = $0 { true } else { false } } == true)
        #expect(machine.beginDelayed() == [.runInterceptors] && machine.phase == .intercepting)
        #expect(machine.beginDelayed().first.map { if case .impossible = $0 { true } else { false } } == true)
        var cancelled = Machine()
        _ = cancelled.resume(delayed: true)
        _ = cancelled.cancel()
        #expect(cancelled.outcome == .cancelled && cancelled.beginDelayed().isEmpty)
    }

    @Test("The life of a plain exchange: resume, interceptors, transfer, head, body, end")
    func plainExchange() {
        var machine = Machine()
        #expect(machine.isSuspended && machine.phase == .suspended)
        let r1 = machine.resume()
        #expect(r1 == [.runInterceptors])
        let r2 = machine.resume()
        #expect(r2 == [])
        let r3 = machine.proceed()
        #expect(r3 == [.startTransfer(hop: 0)])
        let r4 = machine.started(Self.id, hop: 0)
        #expect(r4 == [])
        let r5 = machine.chunk(hop: 0)
        #expect(r5 == false, "no body before the head is decided")
        let r6 = machine.head(Self.head, hop: 0)
        #expect(r6 == [.decide(Self.head, hop: 0)])
        let r7 = machine.allow()
        #expect(r7 == [.unpause(Self.id)], "the refused chunk is asked for again")
        let r8 = machine.chunk(hop: 0)
        #expect(r8)
        let r9 = machine.transferCompleted(.success(TransferMetrics()), hop: 0)
        #expect(r9 == [.complete(.success(TransferMetrics()))])
        #expect(machine.isFinished)
    }

    @Test("A transfer that ends while its head is decided completes when the decision comes")
    func completionWaitsForDecision() {
        var machine = Self.deciding()
        let r10 = machine.transferCompleted(.success(TransferMetrics()), hop: 0)
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
        #expect(r15 == [.cancelTransfer(Self.id), .complete(.failure(cancelled))])
        // Late events after the end change nothing and are not impossible.
        let r16 = deciding.allow()
        let r17 = deciding.head(Self.head, hop: 0)
        #expect(r16 == [] && r17 == [])
        let r18 = deciding.transferCompleted(.failure(.cancelled), hop: 0)
        #expect(r18 == [])
        let r19 = deciding.started(Self.other, hop: 0)
        #expect(r19 == [.cancelTransfer(Self.other)])
    }

    @Test("Following a redirect or a challenge moves to the next hop; the old hop's events are dropped")
    func follow() {
        var machine = Self.deciding()
        let r20 = machine.follow(.redirect, url: Self.url)
        #expect(r20 == [.cancelTransfer(Self.id), .startTransfer(hop: 1)])
        #expect(machine.hop == 1 && machine.redirects == 1)
        let r21 = machine.head(Self.head, hop: 0)
        #expect(r21 == [], "the old hop's head")
        let r22 = machine.transferCompleted(.success(TransferMetrics()), hop: 0)
        #expect(r22 == [])
        let r23 = machine.chunk(hop: 0)
        #expect(r23, "an old hop's bytes are consumed and dropped")
        let r24 = machine.started(Self.other, hop: 1)
        #expect(r24 == [])
        let r25 = machine.head(Self.head, hop: 1)
        #expect(r25 == [.decide(Self.head, hop: 1)])
        let r26 = machine.follow(.authentication, url: Self.url)
        #expect(r26 == [.cancelTransfer(Self.other), .startTransfer(hop: 2)])
        #expect(machine.redirects == 1, "a challenge is no redirect")
    }

    @Test("A failed transfer sent again (a resumable upload's resumption) is a new hop: the old hop's events are dropped, the bound holds")
    func resend() {
        var machine = Machine()
        _ = machine.resume()
        _ = machine.proceed()
        _ = machine.started(Self.id, hop: 0)
        #expect(machine.resend(after: 0, url: Self.url) == [.startTransfer(hop: 1)], "the failed transfer ended: nothing to cancel")
        #expect(machine.hop == 1 && machine.redirects == 0 && machine.authentications == 0)
        #expect(machine.transferCompleted(.failure(.cancelled), hop: 0) == [], "the old hop's end")
        #expect(machine.resend(after: 0, url: Self.url) == [], "a second resend of the old hop")
        _ = machine.started(Self.other, hop: 1)
        #expect(machine.head(Self.head, hop: 1) == [.decide(Self.head, hop: 1)])
        #expect(machine.follow(.resumption, url: Self.url) == [.cancelTransfer(Self.other), .startTransfer(hop: 2)])
        #expect(machine.redirects == 0 && machine.authentications == 0, "a resumption counts as neither")

        var suspended = Machine()
        guard case .impossible = suspended.resend(after: 0, url: Self.url).first else {
            Issue.record("a task never resumed was sent again")
            return
        }
        var bounded = Machine()
        _ = bounded.resume()
        _ = bounded.proceed()
        var last = Machine.Actions()
        for hop in 0..<SessionTask.maximumHops {
            last = bounded.resend(after: hop, url: Self.url)
            if bounded.isFinished { break }
        }
        guard case .complete(.failure(let error)) = last.last else {
            Issue.record("resends are unbounded")
            return
        }
        #expect(error.code == .networkConnectionLost && bounded.hop == SessionTask.maximumHops - 1)
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
        for hop in 0..<SessionTask.maximumHops {
            last = machine.follow(.authentication, url: Self.url)
            if machine.isFinished { break }
            _ = machine.head(Self.head, hop: hop + 1)
        }
        guard case .complete(.failure(let bound)) = last.last else {
            Issue.record("no bound")
            return
        }
        #expect(bound.code == .userAuthenticationRequired && machine.hop == SessionTask.maximumHops - 1)
    }

    @Test("Events out of their phase are reported as impossible and change nothing")
    func impossibleEvents() {
        var machine = Machine()
        guard case .impossible = machine.allow().first else {
            Issue.record("allow before anything was not reported")
            return
        }
        guard case .impossible = machine.proceed().first else {
            Issue.record("proceed before resume was not reported")
            return
        }
        #expect(machine.phase == .suspended)
        var receiving = Self.deciding()
        _ = receiving.allow()
        guard case .impossible = receiving.head(Self.head, hop: 0).first else {
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
        let r27 = machine.chunk(hop: 0)
        #expect(r27 == false)
        let r28 = machine.resume()
        #expect(r28 == [.unpause(Self.id)])
        var waiting = Machine()
        _ = waiting.resume()
        _ = waiting.proceed()
        let r29 = waiting.retryForConnectivity(hop: 0)
        #expect(waiting.phase == .waiting(.connectivity))
        let again = waiting.proceedHop(0)
        #expect(again == [.startTransfer(hop: 0)])
        let r30 = waiting.retryForConnectivity(hop: 0)
        #expect(r29 == 1 && r30 == 2)
        let r31 = waiting.retryForConnectivity(hop: 1)
        #expect(r31 == nil)
    }

    @Test("x-mixed-replace: the task completes only after every part's decision")
    func partDecisions() {
        var machine = Self.deciding()
        _ = machine.allow()
        machine.partDecisionOpened()
        let r32 = machine.transferCompleted(.success(TransferMetrics()), hop: 0)
        #expect(r32 == [])
        let r33 = machine.partDecisionClosed()
        #expect(r33 == [.complete(.success(TransferMetrics()))])
    }

    @Test("A hop waits for a body stream, the server's trust, a client certificate or another request, then starts; a cancel while waiting ends it")
    func waits() {
        for reason in [Machine.Wait.bodyStream, .serverTrust, .clientCertificate, .otherRequest] {
            var machine = Machine()
            _ = machine.resume()
            _ = machine.proceed()
            let waits = machine.wait(reason, hop: 0)
            #expect(waits && machine.phase == .waiting(reason))
            let again = machine.wait(reason, hop: 0)
            #expect(again == false, "already waiting")
            let stale = machine.proceedHop(1)
            #expect(stale == [], "another hop's answer")
            let go = machine.proceedHop(0)
            #expect(go == [.startTransfer(hop: 0)])
            guard case .impossible = machine.proceedHop(0).first else {
                Issue.record("a second answer to one wait was not reported")
                return
            }
            var cancelled = Machine()
            _ = cancelled.resume()
            _ = cancelled.proceed()
            _ = cancelled.wait(reason, hop: 0)
            _ = cancelled.cancel()
            let late = cancelled.proceedHop(0)
            #expect(late == [] && cancelled.outcome == .cancelled, "the answer after a cancel starts nothing")
        }
    }

    @Test("How a task ended: succeeded, failed, or cancelled by the user or the delegate")
    func outcomes() {
        var succeeded = Self.deciding()
        _ = succeeded.allow()
        _ = succeeded.transferCompleted(.success(TransferMetrics()), hop: 0)
        #expect(succeeded.outcome == .succeeded)
        var failed = Self.deciding()
        _ = failed.fail(SessionError(.badServerResponse, failingURL: nil, message: "x"))
        #expect(failed.outcome == .failed)
        var delegateCancelled = Self.deciding()
        _ = delegateCancelled.fail(SessionError(.cancelled, failingURL: nil, message: "the delegate cancelled the task"))
        #expect(delegateCancelled.outcome == .cancelled)
        #expect(Machine().outcome == nil)
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
        _ = machine.head(Self.head, hop: 1)
        _ = machine.follow(.redirect, url: Self.url)
        _ = machine.head(Self.head, hop: 2)
        _ = machine.follow(.authentication, url: Self.url)
        #expect(machine.redirects == 1 && machine.authentications == 2 && machine.hop == 3)
    }

    @Test("The transfer's id may come back after its head and first chunk: it is kept, and the refused chunk asked for again")
    func idAfterHead() {
        var machine = Machine()
        _ = machine.resume()
        _ = machine.proceed()
        let head = machine.head(Self.head, hop: 0)
        #expect(head == [.decide(Self.head, hop: 0)], "the head came before the id")
        let early = machine.chunk(hop: 0)
        #expect(early == false)
        _ = machine.allow()
        let started = machine.started(Self.id, hop: 0)
        #expect(started == [.unpause(Self.id)], "the live transfer is kept, never cancelled")
        let second = machine.started(Self.other, hop: 0)
        #expect(second == [.cancelTransfer(Self.other)], "a second id for one hop is a stray transfer")
    }
}
