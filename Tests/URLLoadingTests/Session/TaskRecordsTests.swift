import Foundation
import Testing
import Transport
@testable import URLLoading

/// What a hop sent and saw, and the cache's part of a task, as the task's
/// state machine keeps them: no socket, no thread.
@Suite struct TaskRecordsTests {
    typealias Machine = SessionTask.StateMachine
    static let head = ResponseHead(status: 302, httpVersion: "HTTP/1.1", headers: [("Location", "/next")])
    static let final = ResponseHead(status: 200, httpVersion: "HTTP/2", headers: [("Content-Length", "2")])
    static let url = URL(string: "http://example.test/")

    static func stored(_ body: String) -> StoredResponse {
        StoredResponse(
            url: "http://example.test/", key: "http://example.test/", status: 200, responseHeaders: HeaderFields(), requestHeaders: HeaderFields(),
            body: Data(body.utf8), requestTime: 1, responseTime: 2, storedAt: 2)
    }

    @Test("A hop's record: what was sent, when it was handed over, its head and when it came; the next hop starts a new one")
    func hopRecord() {
        var machine = Machine()
        _ = machine.resume()
        _ = machine.proceed(with: TaskStateMachineTests.first, request: TaskStateMachineTests.request)
        let sent = Date(timeIntervalSince1970: 100), came = Date(timeIntervalSince1970: 101)
        machine.planned(cookie: "a=1", credentialIdentity: "alice")
        machine.handedOver(at: sent, viaProxy: true)
        _ = machine.started(CurlMulti.TransferID(1))
        _ = machine.head(Self.head, at: came)
        #expect(
            machine.record
                == Machine.HopRecord(startedAt: sent, viaProxy: true, head: Self.head, headDate: came, cookie: "a=1", credentialIdentity: "alice"))
        _ = machine.follow(.redirect, url: Self.url)
        #expect(machine.record == Machine.HopRecord(), "the redirect's hop starts with nothing of the first")
        // The first hop's late events stop at the task's entries (`isCurrent`).
        #expect(!machine.isCurrent(TaskStateMachineTests.first))
        machine.planned(cookie: nil, credentialIdentity: nil)
        machine.handedOver(at: came, viaProxy: false)
        _ = machine.head(Self.final, at: came)
        #expect(machine.record.head == Self.final && machine.record.startedAt == came && !machine.record.viaProxy && machine.record.cookie == nil)
        _ = machine.allow()
        _ = machine.transferCompleted(.success(TransferMetrics()))
        #expect(machine.record.head == Self.final, "the final hop's record outlives the end: the cache stores with it")
        machine.planned(cookie: "after=1", credentialIdentity: nil)
        #expect(machine.record.cookie == nil, "nothing is recorded once the task ended")
    }

    @Test("A hop that waits and goes again (a coalesced request, connectivity) keeps its record; a challenge's hop starts a new one")
    func waitingKeepsRecord() {
        var machine = Machine()
        _ = machine.resume()
        _ = machine.proceed(with: TaskStateMachineTests.first, request: TaskStateMachineTests.request)
        machine.planned(cookie: "a=1", credentialIdentity: nil)
        let waits = machine.wait(.otherRequest)
        #expect(waits)
        _ = machine.proceedHop()
        #expect(machine.record.cookie == "a=1", "the same hop goes again with what it planned")
        _ = machine.started(CurlMulti.TransferID(1))
        _ = machine.head(ResponseHead(status: 401, httpVersion: "HTTP/1.1", headers: []))
        _ = machine.follow(.authentication, url: Self.url)
        #expect(machine.record.cookie == nil && machine.record.head == nil)
    }

    @Test("The cache's part: set when the first hop consults the cache, kept through later hops; an answer from the cache drops the fallback")
    func cacheRecord() {
        var machine = Machine()
        _ = machine.resume()
        _ = machine.proceed(with: TaskStateMachineTests.first, request: TaskStateMachineTests.request)
        let stale = Self.stored("old")
        machine.cacheConsulted(key: "k", status: "ours; fwd=stale", revalidating: stale, fallback: stale, requestTime: 42)
        #expect(machine.cache.key == "k" && machine.cache.status == "ours; fwd=stale" && machine.cache.requestTime == 42)
        #expect(machine.cache.revalidating?.body == Data("old".utf8) && machine.cache.fallback != nil)
        _ = machine.started(CurlMulti.TransferID(1))
        _ = machine.head(Self.head)
        _ = machine.follow(.redirect, url: Self.url)
        #expect(machine.cache.key == "k" && machine.cache.fallback != nil, "a redirect keeps the first request's key")
        #expect(machine.cache.networkHeaders == nil, "no response from the network yet")
        machine.responseAccepted(headers: HeaderFields([HeaderFields.Field("ETag", "\"1\"")]))
        #expect(machine.cache.networkHeaders?["ETag"] == "\"1\"")
        machine.cacheAnswered(status: "ours; fwd=stale; detail=stale-if-error")
        #expect(machine.cache.fallback == nil && machine.cache.status == "ours; fwd=stale; detail=stale-if-error")
    }

    @Test("Request coalescing: the key a task leads for is given back once; waiting once marks the task")
    func coalescing() {
        var machine = Machine()
        let none = machine.endLead()
        #expect(!machine.cache.coalesced && none.key == nil && none.claim == nil)
        machine.leadInFlight("k")
        let led = machine.endLead()
        let again = machine.endLead()
        #expect(led.key == "k")
        #expect(again.key == nil, "the waiting requests are let go once")
        machine.markCoalesced()
        #expect(machine.cache.coalesced)
    }

    /// A claim on a key across a fleet, as the machine holds it.
    struct Claim: FleetClaim {
        let name: String
        func release() {}
    }

    @Test("A fleet claim starts the hop waiting for it and is held until the end, given back once; a claim for a hop that waits for nothing is refused")
    func fleetClaim() {
        var machine = Machine()
        _ = machine.resume()
        _ = machine.proceed(with: TaskStateMachineTests.first, request: TaskStateMachineTests.request)
        let early = machine.fleetClaimGranted(Claim(name: "early"))
        #expect(early == nil && machine.cache.fleetClaim == nil, "a hop that waits for nothing took a claim")
        _ = machine.wait(.otherRequest)
        machine.leadInFlight("k")
        let granted = machine.fleetClaimGranted(Claim(name: "granted"))
        #expect(granted == [.startTransfer(TaskStateMachineTests.first)] && machine.cache.coalesced)
        let end = machine.endLead()
        #expect(end.key == "k" && (end.claim as? Claim)?.name == "granted")
        #expect(machine.endLead().claim == nil, "the claim was given back twice")
        _ = machine.cancel()
        _ = machine.wait(.otherRequest)
        #expect(machine.fleetClaimGranted(Claim(name: "late")) == nil && machine.cache.fleetClaim == nil, "a finished task took a claim")
    }
}
