import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport
import Transport
@testable import URLLoading

/// The task engine driven by a scripted transport, without sockets (as
/// AsyncHTTPClient's RequestBag tests drive its request bag): each test
/// plays heads, chunks and ends in an order a real network can produce and
/// checks what the engine started, cancelled and delivered. The same
/// behaviours are tested end to end against the loopback origin elsewhere;
/// these pin the engine's decisions, phase by phase.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct EngineScriptTests {
    // MARK: Hops

    @Test("A redirect chain runs as one hop after another under the task's one deadline, each earlier hop cancelled")
    func redirectChainSharesOneDeadline() async throws {
        // A deadline no stall of a loaded machine reaches: the hops' budgets are what is checked.
        let harness = EngineHarness { $0.timeoutIntervalForResource = 3600 }
        defer { harness.session.invalidateAndCancel() }
        let (_, outcome) = harness.start("/a")
        let first = try #require(await harness.executor.transfer(0))
        first.head(302, [("Location", "/b")])
        let second = try #require(await harness.executor.transfer(1))
        second.head(307, [("Location", "/c")])
        let third = try #require(await harness.answer(2, body: "the end"))
        await outcome.wait()
        #expect(outcome.body == "the end")
        #expect(outcome.response?.url?.path == "/c")
        #expect([first, second, third].map { URL(string: $0.request.url)?.path } == ["/a", "/b", "/c"])
        #expect(first.wasCancelled && second.wasCancelled, "a redirect's own body is never read")
        #expect(!third.wasCancelled)
        // One deadline: each hop gets what is left of it, never a fresh hour.
        let budgets = [first, second, third].map { $0.request.totalTimeout ?? .zero }
        #expect(budgets.allSatisfy { $0 > .zero && $0 <= .seconds(3600) }, "\(budgets)")
        #expect(budgets[2] <= budgets[0], "\(budgets)")
    }

    @Test("401 with a Basic challenge: the delegate's credential goes on a new hop, whose 200 is the task's answer")
    func challengeAnsweredOnANewHop() async throws {
        let delegate = HoldingDelegate(credential: Credential(user: "ann", password: "pw", persistence: .forSession))
        let harness = EngineHarness(delegate: delegate)
        defer { harness.session.invalidateAndCancel() }
        let task = harness.delegated("/private")
        let challenged = try #require(await harness.executor.transfer(0))
        #expect(challenged.field("Authorization") == nil)
        challenged.head(401, [("WWW-Authenticate", "Basic realm=\"r\""), ("Content-Length", "2")])
        let answered = try #require(await harness.answer(1, body: "in"))
        #expect(answered.field("Authorization") == "Basic " + Data("ann:pw".utf8).base64EncodedString())
        await bounded(delegate.completed, "didCompleteWithError")
        #expect(delegate.error == nil)
        #expect(delegate.data == "in", "the 401's body is not the task's")
        #expect(challenged.wasCancelled)
        #expect((task.response as? HTTPURLResponse)?.statusCode == 200)
        #expect(harness.executor.started.count == 2)
    }

    @Test("A late head, chunk and end of a hop left by a redirect reach nothing: the task answers with the current hop")
    func lateEventsOfAnOldHopAreDropped() async throws {
        // The old hop's cancel is still on its way while its events come.
        let harness = EngineHarness(processesCancels: false)
        defer { harness.session.invalidateAndCancel() }
        let (_, outcome) = harness.start("/old")
        let old = try #require(await harness.executor.transfer(0))
        old.head(302, [("Location", "/new")])
        let current = try #require(await harness.executor.transfer(1))
        // What the old hop's connection still had on its way when the cancel was sent.
        #expect(old.wasCancelled)
        old.head(203, [("Content-Length", "5"), ("X-Hop", "old")])
        #expect(old.body("stale"), "an old hop's chunk is taken and dropped, never a pause")
        old.fail(.connection(.connectionLost, "reset"))
        #expect(!outcome.isFinished, "an old hop's failure ended the task")
        current.head(200, [("Content-Length", "5"), ("X-Hop", "new")])
        #expect(await current.bodyTaken("fresh"))
        current.finish(bytesReceived: 5)
        await outcome.wait()
        #expect(outcome.error == nil)
        #expect(outcome.body == "fresh")
        #expect(outcome.response?.url?.path == "/new")
        #expect(outcome.response?.statusCode == 200 && outcome.response?.value(forHTTPHeaderField: "X-Hop") == "new", "the old hop's head")
        #expect(outcome.calls == 1)
    }

    // MARK: The cache

    @Test("A fresh stored response answers without the executor")
    func cacheHitNeverStartsATransfer() async throws {
        let harness = EngineHarness()
        defer { harness.session.invalidateAndCancel() }
        let (_, first) = harness.start("/fresh")
        try #require(await harness.answer(0, fields: [("Cache-Control", "max-age=600")], body: "kept") != nil)
        await first.wait()
        let (_, second) = harness.start("/fresh")
        await second.wait()
        #expect(second.body == "kept")
        #expect(second.response?.statusCode == 200)
        #expect(harness.executor.started.count == 1, "the hit started a transfer")
    }

    @Test("A stale entry is revalidated with its validator; the 304's fields are merged into it and its body served")
    func notModifiedIsMergedIntoTheStoredEntry() async throws {
        let harness = EngineHarness()
        defer { harness.session.invalidateAndCancel() }
        let (_, first) = harness.start("/validated")
        try #require(
            await harness.answer(0, fields: [("Cache-Control", "max-age=0"), ("ETag", "\"v1\""), ("X-Generation", "1")], body: "stored body") != nil)
        await first.wait()
        let (_, second) = harness.start("/validated")
        let revalidation = try #require(await harness.executor.transfer(1))
        #expect(revalidation.field("If-None-Match") == "\"v1\"")
        revalidation.head(304, [("Cache-Control", "max-age=600"), ("ETag", "\"v1\""), ("X-Generation", "2")])
        // The engine has its answer from the head; the 304's end and the
        // engine's cancel of it race, as on the wire.
        revalidation.finishUnlessCancelled()
        await second.wait()
        #expect(second.body == "stored body")
        #expect(second.response?.statusCode == 200)
        #expect(second.response?.value(forHTTPHeaderField: "X-Generation") == "2")
        // The merged entry is fresh now: a third GET is a hit.
        let (_, third) = harness.start("/validated")
        await third.wait()
        #expect(third.response?.value(forHTTPHeaderField: "X-Generation") == "2")
        #expect(harness.executor.started.count == 2)
    }

    @Test("stale-if-error: a revalidation whose connection fails serves the stored response (RFC 5861 §4)")
    func staleIfErrorServesTheStoredResponse() async throws {
        let harness = EngineHarness()
        defer { harness.session.invalidateAndCancel() }
        let (_, first) = harness.start("/fallback")
        try #require(await harness.answer(0, fields: [("Cache-Control", "max-age=0, stale-if-error=600"), ("ETag", "\"e\"")], body: "old") != nil)
        await first.wait()
        let (_, second) = harness.start("/fallback")
        let failing = try #require(await harness.executor.transfer(1))
        failing.fail(.connection(.cannotConnect, "refused"))
        await second.wait()
        #expect(second.error == nil)
        #expect(second.body == "old")
        #expect(second.response?.statusCode == 200)
    }

    @Test("A response that ends before its transfer's id comes back is stored under the Cookie its request sent (Vary: Cookie)")
    func entryKeyedByWhatTheHopSentEvenWhenItEndsAtOnce() async throws {
        // The whole response inside `start`: what the hop sent must be on
        // record before the transfer starts, not after the hand-over.
        let harness = EngineHarness(playsInStart: { transfer in
            let body = "for a=1"
            transfer.head(200, [("Cache-Control", "max-age=600"), ("Vary", "Cookie"), ("Content-Length", "\(body.utf8.count)")])
            if !transfer.body(body) { Issue.record("the body was refused") }
            transfer.finish(bytesReceived: Int64(body.utf8.count))
        })
        defer { harness.session.invalidateAndCancel() }
        let store = try #require(harness.session.configuration.httpCookieStorage)
        let url = EngineHarness.url("/varies")
        #expect(store.setCookies(["a=1"], for: url).count == 1)
        let (_, first) = harness.start("/varies")
        await first.wait()
        #expect(first.body == "for a=1")
        #expect(harness.executor.started.first?.field("Cookie") == "a=1")
        store.removeAll()
        let (_, second) = harness.start("/varies")
        await second.wait()
        #expect(harness.executor.started.count == 2, "a request without the cookie was answered with the response to a=1")
        #expect(harness.executor.started.last?.field("Cookie") == nil)
    }

    // MARK: Cancel, phase by phase

    @Test("Cancel before resume: the task ends cancelled and no transfer starts")
    func cancelBeforeStart() async throws {
        let harness = EngineHarness()
        defer { harness.session.invalidateAndCancel() }
        let (task, outcome) = harness.task("/never")
        task.cancel()
        task.resume()
        await outcome.wait()
        #expect(outcome.code == .cancelled)
        #expect(harness.executor.started.isEmpty)
        #expect(task.state == .completed)
    }

    @Test("Cancel while awaiting the head: the transfer is cancelled and the task ends cancelled, once")
    func cancelAwaitingHead() async throws {
        let harness = EngineHarness()
        defer { harness.session.invalidateAndCancel() }
        let (task, outcome) = harness.start("/slow")
        let transfer = try #require(await harness.executor.transfer(0))
        task.cancel()
        await outcome.wait()
        #expect(outcome.code == .cancelled)
        #expect(await eventually { transfer.hasEnded })
        #expect(transfer.wasCancelled)
        transfer.head(200)  // a head already on its way changes nothing
        #expect(outcome.calls == 1)
    }

    @Test("Cancel while the delegate decides on the head: cancelled, the body never delivered")
    func cancelWhileDeciding() async throws {
        let delegate = HoldingDelegate(holdsHead: true)
        let harness = EngineHarness(delegate: delegate)
        defer { harness.session.invalidateAndCancel() }
        let task = harness.delegated("/deciding")
        let transfer = try #require(await harness.executor.transfer(0))
        transfer.head(200, [("Content-Length", "4")])
        await bounded(delegate.headAsked, "didReceive response")
        task.cancel()
        delegate.letHeadGo.open()
        await bounded(delegate.completed, "didCompleteWithError")
        #expect(delegate.error?.code == .cancelled)
        #expect(transfer.wasCancelled)
        #expect(delegate.data.isEmpty)
    }

    @Test("Cancel while receiving the body: cancelled after the bytes so far")
    func cancelWhileReceiving() async throws {
        let delegate = HoldingDelegate()
        let harness = EngineHarness(delegate: delegate)
        defer { harness.session.invalidateAndCancel() }
        let task = harness.delegated("/receiving")
        let transfer = try #require(await harness.executor.transfer(0))
        transfer.head(200, [("Content-Length", "8")])
        #expect(await transfer.bodyTaken("half"))
        task.cancel()
        await bounded(delegate.completed, "didCompleteWithError")
        #expect(delegate.error?.code == .cancelled)
        #expect(transfer.wasCancelled)
        #expect(task.countOfBytesReceived == 4)
    }

    @Test("Cancel while the response is offered to the cache: the task has ended, it succeeds and the entry is stored")
    func cancelWhileStoring() async throws {
        let delegate = HoldingDelegate(holdsCache: true)
        let harness = EngineHarness(delegate: delegate)
        defer { harness.session.invalidateAndCancel() }
        let task = harness.delegated("/storing")
        try #require(await harness.answer(0, fields: [("Cache-Control", "max-age=600")], body: "keep me") != nil)
        await bounded(delegate.cacheAsked, "willCacheResponse")
        task.cancel()
        delegate.letCacheGo.open()
        await bounded(delegate.completed, "didCompleteWithError")
        #expect(delegate.error == nil, "a cancel after the body's end changed the outcome")
        let (_, hit) = harness.start("/storing")
        await hit.wait()
        #expect(hit.body == "keep me")
        #expect(harness.executor.started.count == 1)
    }

    // MARK: Suspend, resume

    @Test("Suspended mid-body, the next chunk is refused (the transfer pauses); resume unpauses and the chunk is delivered")
    func suspendAndResumeMidBody() async throws {
        let harness = EngineHarness()
        defer { harness.session.invalidateAndCancel() }
        let (task, outcome) = harness.start("/paused")
        let transfer = try #require(await harness.executor.transfer(0))
        transfer.head(200, [("Content-Length", "6")])
        #expect(await transfer.bodyTaken("abc"))
        task.suspend()
        #expect(task.state == .suspended)
        #expect(!transfer.body("def"), "a suspended task took a chunk")
        #expect(transfer.unpauses == 0)
        task.resume()
        #expect(await eventually { !transfer.isPaused }, "resume did not let the refused chunk in")
        #expect(transfer.unpauses == 1)
        transfer.finish(bytesReceived: 6)
        await outcome.wait()
        #expect(outcome.body == "abcdef")
    }

    // MARK: The deadline

    @Test("A hop after the deadline is never started: the redirect past it ends the task timedOut")
    func deadlinePassedBeforeTheNextHop() async throws {
        let harness = EngineHarness { $0.timeoutIntervalForResource = 0.3 }
        defer { harness.session.invalidateAndCancel() }
        let (_, outcome) = harness.start("/late")
        let transfer = try #require(await harness.executor.transfer(0))
        let budget = try #require(transfer.request.totalTimeout)
        #expect(budget <= .milliseconds(300))
        // Time itself is what this test is about: wait until the deadline has passed.
        let passed = ContinuousClock.now + budget + .milliseconds(50)
        #expect(await eventually { ContinuousClock.now > passed })
        transfer.head(302, [("Location", "/later")])
        await outcome.wait()
        #expect(outcome.code == .timedOut)
        #expect(harness.executor.started.count == 1, "a hop started after the deadline")
    }

    @Test("The transport's timeout while awaiting the head ends the task timedOut with the failing URL")
    func deadlineWhileAwaitingHead() async throws {
        let harness = EngineHarness { $0.timeoutIntervalForResource = 3600 }
        defer { harness.session.invalidateAndCancel() }
        let (_, outcome) = harness.start("/quiet")
        let transfer = try #require(await harness.executor.transfer(0))
        transfer.fail(.connection(.timedOut, "the resource timeout passed"))
        await outcome.wait()
        #expect(outcome.code == .timedOut)
        #expect(outcome.error?.failingURL?.path == "/quiet")
    }

    @Test("The deadline passing while the delegate decides on the head ends the task timedOut; the late answer changes nothing")
    func deadlineWhileDeciding() async throws {
        let delegate = HoldingDelegate(holdsHead: true)
        let harness = EngineHarness(delegate: delegate) { $0.timeoutIntervalForResource = 3600 }
        defer { harness.session.invalidateAndCancel() }
        _ = harness.delegated("/undecided")
        let transfer = try #require(await harness.executor.transfer(0))
        transfer.head(200, [("Content-Length", "4")])
        await bounded(delegate.headAsked, "didReceive response")
        transfer.fail(.connection(.timedOut, "the resource timeout passed"))
        delegate.letHeadGo.open()
        await bounded(delegate.completed, "didCompleteWithError")
        #expect(delegate.error?.code == .timedOut)
        #expect(delegate.data.isEmpty)
    }

    @Test("The deadline passing mid-body ends the task timedOut, the bytes so far counted")
    func deadlineWhileReceiving() async throws {
        let harness = EngineHarness { $0.timeoutIntervalForResource = 3600 }
        defer { harness.session.invalidateAndCancel() }
        let (task, outcome) = harness.start("/endless")
        let transfer = try #require(await harness.executor.transfer(0))
        transfer.head(200)
        #expect(await transfer.bodyTaken("more"))
        transfer.fail(.connection(.timedOut, "the resource timeout passed"))
        await outcome.wait()
        #expect(outcome.code == .timedOut)
        #expect(task.countOfBytesReceived == 4)
    }
}
