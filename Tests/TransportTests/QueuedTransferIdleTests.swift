import Foundation
import Testing
import TestSupport
@testable import Transport

/// A transfer whose request timeout counts from its sending: while it
/// waits in libcurl's queue for one of its host's connections it never
/// times out for idleness; once its request is out, the clock runs. What
/// passes here is time itself (request timeouts of a second, waits of
/// seconds), on an origin with a thread of its own.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct QueuedTransferIdleTests {
    @Test func waitingForAConnectionPastTheTimeout() async throws {
        let origin = try await TestOrigin.start(ownThread: true)
        let gate = OriginGate()
        origin.route("/held", response: ScriptedResponse(parts: [.bytes([1]), .waitFor(gate), .bytes([2])], framing: .contentLength))
        origin.route("/next", response: ScriptedResponse(body: "next"))
        let multi = try CurlMulti(maximumConnectionsPerHost: 1)
        // The host's one connection, held mid-body until the gate opens.
        let holder = Recorder()
        multi.start(TransferRequest(url: origin.url("/held").absoluteString), observer: holder)
        #expect(await eventually { holder.bytesSoFar > 0 }, "the first transfer got no byte")

        var fromStart = TransferRequest(url: origin.url("/next").absoluteString)
        fromStart.idleTimeout = .seconds(1)
        // Three seconds: once its request is out, a stalled test process
        // must not make it time out; it still waits longer than that here.
        var fromSend = fromStart
        fromSend.idleTimeout = .seconds(3)
        fromSend.idleTimeoutCountsFromSend = true
        let timesOut = Recorder()
        let waits = Recorder()
        multi.start(fromStart, observer: timesOut)
        multi.start(fromSend, observer: waits)

        // Apple's rule: a transfer that waits for a connection past its
        // request timeout fails, as this one does.
        let failed = await timesOut.outcome()
        guard case .failure(let error) = failed.result else {
            Issue.record("a transfer waiting past its request timeout did not fail")
            return
        }
        #expect(error.kind == .idleTimeout)
        // The other has waited as long, and waits on past its own timeout.
        try await Task.sleep(for: .seconds(3))
        #expect(!waits.isDone, "a transfer whose timeout counts from its sending timed out while it waited for a connection")

        gate.open()
        #expect(await holder.outcome().body == Data([1, 2]))
        let outcome = await waits.outcome()
        #expect(throws: Never.self) { try outcome.result?.get() }
        #expect(outcome.body == Data("next".utf8))
        multi.shutdown()
        try await origin.shutdown()
    }

    @Test func theClockRunsOnceTheRequestIsSent() async throws {
        let origin = try await TestOrigin.start(ownThread: true)
        // The request arrives; no byte of an answer comes in the test's time.
        var silent = ScriptedResponse(body: "late")
        silent.delayBeforeHead = .seconds(120)
        origin.route("/silent", response: silent)
        let multi = try CurlMulti()
        var request = TransferRequest(url: origin.url("/silent").absoluteString)
        request.idleTimeout = .seconds(1)
        request.idleTimeoutCountsFromSend = true
        let outcome = await TransportTests.transfer(multi, request)
        guard case .failure(let error) = outcome.result else {
            Issue.record("a request sent and never answered did not time out")
            return
        }
        #expect(error.kind == .idleTimeout)
        #expect(origin.requests(to: "/silent").count == 1)
        multi.shutdown()
        try await origin.shutdown()
    }
}
