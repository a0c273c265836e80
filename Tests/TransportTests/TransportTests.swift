import Foundation
import Locking
import Synchronization
import Testing
import TestSupport
@testable import Transport

/// Collects a transfer's events and hands the outcome to an awaiting test.
final class Recorder: TransferObserver {
    struct Outcome: Sendable {
        var head: ResponseHead?
        var body = Data()
        var sent: [Int64] = []
        var result: Result<TransferMetrics, TransferError>?
        var headBeforeBody = true
    }

    private let state = Lock<(outcome: Outcome, waiter: CheckedContinuation<Outcome, Never>?, done: Bool, refuseNext: Int)>((Outcome(), nil, false, 0))
    private let refusals: AsyncStream<Void>
    private let refused: AsyncStream<Void>.Continuation

    init() {
        (refusals, refused) = AsyncStream.makeStream(of: Void.self)
    }

    /// Refuse (pause on) the next `count` chunks.
    func refuse(_ count: Int) { state.withLock { $0.refuseNext = count } }

    /// Body bytes taken so far.
    var bytesSoFar: Int { state.withLock { $0.outcome.body.count } }

    /// Waits until a chunk has been refused.
    func waitForRefusal() async {
        var iterator = refusals.makeAsyncIterator()
        _ = await iterator.next()
    }

    func transferDidReceiveHead(_ head: ResponseHead) {
        state.withLock { $0.outcome.head = head }
    }

    func transferDidReceive(_ chunk: UnsafeRawBufferPointer) -> Bool {
        state.withLock { state in
            if state.refuseNext > 0 {
                state.refuseNext -= 1
                refused.yield()
                return false
            }
            if state.outcome.head == nil { state.outcome.headBeforeBody = false }
            state.outcome.body.append(contentsOf: chunk)
            return true
        }
    }

    func transferDidSendBody(sent: Int64, total: Int64) {
        state.withLock { $0.outcome.sent.append(sent) }
    }

    func transferDidComplete(_ result: Result<TransferMetrics, TransferError>) {
        // Whoever waits for a refusal must not wait for ever once the transfer is over.
        refused.finish()
        let waiter = state.withLock { state -> (CheckedContinuation<Outcome, Never>, Outcome)? in
            state.outcome.result = result
            state.done = true
            defer { state.waiter = nil }
            return state.waiter.map { ($0, state.outcome) }
        }
        waiter?.0.resume(returning: waiter!.1)
    }

    var bodySize: Int { state.withLock { $0.outcome.body.count } }

    /// Whether the transfer completed (either way).
    var isDone: Bool { state.withLock { $0.done } }

    func outcome() async -> Outcome {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Outcome? in
                if state.done { return state.outcome }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct TransportTests {
    static func transfer(_ multi: CurlMulti, _ request: TransferRequest) async -> Recorder.Outcome {
        let recorder = Recorder()
        multi.start(request, observer: recorder)
        return await recorder.outcome()
    }

    @Test func getDeliversHeadBodyAndMetrics() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/a", response: ScriptedResponse(headers: [HeaderField("X-A", "1"), HeaderField("X-A", "2")], body: "hello"))
        let multi = try CurlMulti()
        let outcome = await Self.transfer(multi, TransferRequest(url: origin.url("/a").absoluteString, headers: [("X-Req", "yes")]))
        let metrics = try outcome.result?.get()
        #expect(outcome.head?.status == 200)
        #expect(outcome.head?.headers.filter { $0.name == "X-A" }.map(\.value) == ["1", "2"])
        #expect(outcome.body == Data("hello".utf8))
        #expect(outcome.headBeforeBody)
        #expect(metrics?.bytesReceived == 5)
        #expect(metrics?.remoteAddress == "127.0.0.1")
        #expect(metrics?.remotePort == origin.port)
        #expect(origin.requests.first?.header("X-Req") == "yes")
        // No cookie engine, no redirects followed by libcurl.
        #expect(origin.requests.first?.header("Cookie") == nil)
        multi.shutdown()
        try await origin.shutdown()
    }

    @Test("A reused handle carries nothing of the transfer before it: fields, content decoding, method and body are each request's own")
    func reusedHandlesStartClean() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/echo") { request in ScriptedResponse(status: 200, body: request.body) }
        let multi = try CurlMulti()  // one loop: each transfer takes the handle the one before left
        let url = origin.url("/echo").absoluteString
        var first = TransferRequest(url: url, headers: [("X-Req", "one")])
        first.totalTimeout = .seconds(30)
        first.connectTimeout = .seconds(30)
        var second = TransferRequest(url: url)
        second.decodeContent = false
        let put = TransferRequest(url: url, method: "PUT", headers: [("X-Put", "yes")], body: .data(Data("sent".utf8)))
        var third = TransferRequest(url: url)
        third.decodeContent = false
        for request in [first, second, put, third, first] {
            let outcome = await Self.transfer(multi, request)
            #expect(outcome.head?.status == 200)
        }
        let seen = origin.requests
        try #require(seen.count == 5)
        #expect(seen.map(\.method) == ["GET", "GET", "PUT", "GET", "GET"])
        #expect(seen.map { $0.header("X-Req") } == ["one", nil, nil, nil, "one"])
        #expect(seen.map { $0.header("X-Put") } == [nil, nil, "yes", nil, nil])
        #expect(seen.map { $0.header("Accept-Encoding") != nil } == [true, false, true, false, true])
        #expect(seen.map { $0.header("Content-Length") } == [nil, nil, "4", nil, nil])
        #expect(seen[2].body == Array("sent".utf8))
        multi.shutdown()
        try await origin.shutdown()
    }

    @Test func redirectsAreNotFollowed() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/from", Routes.redirect(to: "/to"))
        let multi = try CurlMulti()
        let outcome = await Self.transfer(multi, TransferRequest(url: origin.url("/from").absoluteString))
        #expect(outcome.head?.status == 302)
        #expect(outcome.head?.headers.first { $0.name == "Location" }?.value == "/to")
        #expect(origin.requests(to: "/to").isEmpty)
        multi.shutdown()
        try await origin.shutdown()
    }

    @Test func postSendsTheBodyAndReportsProgress() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/echo") { request in ScriptedResponse(status: 201, body: request.body) }
        let multi = try CurlMulti()
        let body = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0) })
        let outcome = await Self.transfer(
            multi,
            TransferRequest(
                url: origin.url("/echo").absoluteString, method: "PUT",
                headers: [("Content-Type", "application/octet-stream")], body: .data(body)))
        #expect(outcome.head?.status == 201)
        #expect(outcome.body == body)
        #expect(origin.requests.first?.method == "PUT")
        #expect(outcome.sent.last == Int64(body.count))
        #expect(outcome.sent == outcome.sent.sorted())
        multi.shutdown()
        try await origin.shutdown()
    }

    @Test("A file body from an offset: the bytes from there, its length counted as sent; an offset the file cannot seek to fails as unreadable before anything is sent")
    func fileBodyFromAnOffset() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/echo") { request in ScriptedResponse(status: 201, body: request.body) }
        let multi = try CurlMulti()
        let directory = TemporaryDirectory("file-offset")
        let file = directory.url.appendingPathComponent("body")
        let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try bytes.write(to: file)
        let url = origin.url("/echo").absoluteString
        let rest = await Self.transfer(multi, TransferRequest(url: url, method: "PUT", body: .file(path: file.path, offset: 100_001, length: 150_000)))
        #expect(rest.head?.status == 201)
        #expect(rest.body == bytes[100_001..<250_001])
        #expect(rest.sent.last == 150_000)
        let whole = await Self.transfer(multi, TransferRequest(url: url, method: "PUT", body: .file(path: file.path, length: 300_000)))
        #expect(whole.body == bytes, "a handle after an offset body starts from the file's start")
        let negative = await Self.transfer(multi, TransferRequest(url: url, method: "PUT", body: .file(path: file.path, offset: -1, length: 10)))
        if case .failure(let error) = negative.result {
            #expect(error.failure == .bodyUnreadable, "\(error)")
        } else {
            Issue.record("a negative offset was sent")
        }
        #expect(origin.requests.count == 2)
        multi.shutdown()
        try await origin.shutdown()
    }

    @Test("A large body goes out without libcurl's own `Expect: 100-continue` (many servers never answer it: each upload waited a second); a caller's Expect is sent")
    func noExpectContinueOfLibcurlsOwn() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/put") { request in ScriptedResponse(status: 201, body: "\(request.bodyLength)") }
        let multi = try CurlMulti()
        // Above libcurl's threshold (1 MiB) for each way it sends a body.
        let body = Data(count: 3 << 20)
        let pipe = BodyPipe()
        pipe.setReadableHandler {}
        let bodies: [(String, TransferRequest.Body)] = [("PUT", .data(body)), ("POST", .data(body)), ("PATCH", .stream(pipe, length: -1))]
        Thread {
            _ = pipe.write(body)
            pipe.finish()
        }.start()
        for (method, requestBody) in bodies {
            let outcome = await Self.transfer(
                multi, TransferRequest(url: origin.url("/put").absoluteString, method: method, headers: [], body: requestBody))
            #expect(outcome.head?.status == 201, "\(method)")
        }
        let asked = await Self.transfer(
            multi,
            TransferRequest(url: origin.url("/put").absoluteString, method: "PUT", headers: [("Expect", "100-continue")], body: .data(body)))
        #expect(asked.head?.status == 201)
        let seen = origin.requests(to: "/put")
        #expect(seen.map(\.method) == ["PUT", "POST", "PATCH", "PUT"])
        #expect(seen.map { $0.header("Expect") } == [nil, nil, nil, "100-continue"])
        #expect(seen.allSatisfy { $0.bodyLength == body.count })
        multi.shutdown()
        try await origin.shutdown()
    }

    @Test func emptyBodyStillDeliversTheHead() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/none", response: ScriptedResponse(status: 204, framing: .none))
        let multi = try CurlMulti()
        let outcome = await Self.transfer(multi, TransferRequest(url: origin.url("/none").absoluteString))
        #expect(outcome.head?.status == 204)
        #expect(throws: Never.self) { try outcome.result?.get() }
        multi.shutdown()
        try await origin.shutdown()
    }

    @Test func serverThatClosesEarlyIsAnError() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/short", response: ScriptedResponse(parts: [.bytes(Array(repeating: 1, count: 10)), .closeConnection], framing: .declaredLength(100)))
        let multi = try CurlMulti()
        let outcome = await Self.transfer(multi, TransferRequest(url: origin.url("/short").absoluteString))
        guard case .failure(let error) = outcome.result else { Issue.record("expected a failure"); return }
        #expect(error.kind == .curl)
        #expect(error.curl?.code == 18)  // CURLE_PARTIAL_FILE
        multi.shutdown()
        try await origin.shutdown()
    }

    @Test("A head past the transport's limit fails as headTooLarge (its memory is measured in HugeHeadMemoryTests)")
    func hugeHeadIsRefused() async throws {
        let origin = try await TestOrigin.start()
        // 50 MB of header lines.
        origin.route("/huge", response: .hugeHead(bytes: 50_000_000))
        let multi = try CurlMulti()
        let outcome = await Self.transfer(multi, TransferRequest(url: origin.url("/huge").absoluteString))
        guard case .failure(let error) = outcome.result else { Issue.record("expected a failure"); return }
        #expect(error.kind == .headTooLarge, "\(error)")
        multi.shutdown()
        try await origin.shutdown()
    }

    @Test("Loops shut down while other threads cancel and unpause their transfers (tools/test --sanitize=address finds a use after free)")
    func shutdownWhileOthersSend() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        origin.route("/slow", response: ScriptedResponse(parts: [.bytes([1]), .pause(.seconds(5)), .bytes([2])], framing: .contentLength))
        var completed = 0
        for _ in 0..<40 {
            let multi = try CurlMulti()
            let recorders = (0..<4).map { _ in Recorder() }
            let ids = recorders.map { multi.start(TransferRequest(url: origin.url("/slow").absoluteString), observer: $0) }
            let group = DispatchGroup()
            for _ in 0..<3 {
                group.enter()
                Thread {
                    for _ in 0..<50 {
                        for id in ids {
                            multi.unpause(id)
                            multi.cancel(id)
                        }
                    }
                    group.leave()
                }.start()
            }
            multi.shutdown()
            await withCheckedContinuation { continuation in group.notify(queue: .global()) { continuation.resume() } }
            for recorder in recorders where (await recorder.outcome()).result != nil { completed += 1 }
        }
        // Every transfer of every loop ended (cancelled or shut down), once.
        #expect(completed == 160)
    }

    @Test func cancelEndsATransferThatWouldNeverFinish() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/slow", response: ScriptedResponse(parts: [.bytes([1]), .waitFor(OriginGate()), .bytes([2])], framing: .contentLength))
        let multi = try CurlMulti()
        let recorder = Recorder()
        let id = multi.start(TransferRequest(url: origin.url("/slow").absoluteString), observer: recorder)
        // Mid-transfer: the first byte arrived, the rest never comes.
        #expect(await eventually { recorder.bytesSoFar > 0 }, "no byte arrived")
        multi.cancel(id)
        let outcome = await recorder.outcome()
        guard case .failure(let error) = outcome.result else { Issue.record("expected a failure"); return }
        #expect(error.kind == .cancelled)
        multi.shutdown()
        try await origin.shutdown()
    }

    @Test func idleTimeoutFires() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/stall", response: ScriptedResponse(parts: [.bytes([1]), .waitFor(OriginGate()), .bytes([2])], framing: .contentLength))
        let multi = try CurlMulti()
        var request = TransferRequest(url: origin.url("/stall").absoluteString)
        request.idleTimeout = .seconds(1)
        let outcome = await Self.transfer(multi, request)
        guard case .failure(let error) = outcome.result else { Issue.record("expected a failure"); return }
        #expect(error.kind == .idleTimeout)
        multi.shutdown()
        try await origin.shutdown()
    }

    @Test func tricklingBodyIsNotIdle() async throws {
        // Its own thread and seconds of margin: the suite shares two cores.
        let origin = try await TestOrigin.start(ownThread: true)
        // Ten bytes half a second apart: five seconds in all, never three
        // without a byte. Each byte must count as activity.
        let parts = (0..<10).flatMap { index -> [ScriptedResponse.Part] in [.pause(.milliseconds(500)), .bytes([UInt8(index)])] }
        origin.route("/trickle", response: ScriptedResponse(parts: parts, framing: .contentLength))
        let multi = try CurlMulti()
        var request = TransferRequest(url: origin.url("/trickle").absoluteString)
        request.idleTimeout = .seconds(3)
        let outcome = await Self.transfer(multi, request)
        #expect(throws: Never.self) { try outcome.result?.get() }
        #expect(outcome.body == Data((0..<10).map { UInt8($0) }))
        multi.shutdown()
        try await origin.shutdown()
    }

    @Test func refusedChunksArriveAgainAfterUnpause() async throws {
        let origin = try await TestOrigin.start()
        let size = 3_000_000
        origin.route("/big", response: ScriptedResponse(parts: [.pattern(offset: 0, count: size)]))
        let multi = try CurlMulti()
        let recorder = Recorder()
        recorder.refuse(1)
        let id = multi.start(TransferRequest(url: origin.url("/big").absoluteString), observer: recorder)
        await recorder.waitForRefusal()
        // The first chunk was refused, so nothing flowed: the transfer waits for unpause.
        #expect(recorder.bodySize == 0)
        multi.unpause(id)
        let outcome = await recorder.outcome()
        #expect(outcome.body == Data(TestOrigin.pattern(offset: 0, count: size)))
        multi.shutdown()
        try await origin.shutdown()
    }

    @Test func twoHundredConcurrentTransfersOnSixConnections() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/item") { request in
            ScriptedResponse(parts: [.pause(.milliseconds(5)), .bytes(Array((request.query ?? "").utf8))])
        }
        let multi = try CurlMulti(maximumConnectionsPerHost: 6)
        let outcomes = await withTaskGroup(of: (Int, Recorder.Outcome).self) { group in
            for index in 0..<200 {
                group.addTask { (index, await Self.transfer(multi, TransferRequest(url: origin.url("/item?\(index)").absoluteString))) }
            }
            var all: [Int: Recorder.Outcome] = [:]
            for await (index, outcome) in group { all[index] = outcome }
            return all
        }
        #expect(outcomes.count == 200)
        for (index, outcome) in outcomes {
            #expect(outcome.body == Data("\(index)".utf8))
        }
        #expect(origin.peakConcurrentConnections <= 6)
        multi.shutdown()
        try await origin.shutdown()
    }

    @Test func afterShutdownTransfersFailAtOnce() async throws {
        let multi = try CurlMulti()
        multi.shutdown()
        let outcome = await Self.transfer(multi, TransferRequest(url: "http://127.0.0.1:9/"))
        guard case .failure(let error) = outcome.result else { Issue.record("expected a failure"); return }
        #expect(error.kind == .shutDown)
    }
}

@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct TransportPauseTests {
    @Test func pausedByUsIsNotIdle() async throws {
        let origin = try await TestOrigin.start(ownThread: true)
        // A body the socket buffers hold whole: the test is about our idle
        // clock during a long pause, not about TCP's zero-window recovery.
        origin.route("/big", response: ScriptedResponse(parts: [.pattern(offset: 0, count: 300_000)]))
        let multi = try CurlMulti()
        let recorder = Recorder()
        recorder.refuse(1)
        var request = TransferRequest(url: origin.url("/big").absoluteString)
        // Seconds, not less: the origin shares two cores with the whole suite.
        request.idleTimeout = .seconds(6)
        let id = multi.start(request, observer: recorder)
        await recorder.waitForRefusal()
        #expect(recorder.bodySize == 0)
        // The pause under test outlasts the idle timeout.
        try await Task.sleep(for: .seconds(7))
        multi.unpause(id)
        let outcome = await recorder.outcome()
        #expect(throws: Never.self) { try outcome.result?.get() }
        #expect(outcome.body.count == 300_000)
        multi.shutdown()
        try await origin.shutdown()
    }
}

@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct HeadParsingTests {
    static func head(_ raw: String, body: String = "ok") async throws -> Recorder.Outcome {
        let origin = try await TestOrigin.start()
        var response = ScriptedResponse(body: body)
        response.rawHead = Array(raw.utf8)
        origin.route("/raw", response: response)
        let multi = try CurlMulti()
        let outcome = await TransportTests.transfer(multi, TransferRequest(url: origin.url("/raw").absoluteString))
        multi.shutdown()
        try await origin.shutdown()
        return outcome
    }

    @Test("RFC 9110 §15.2: an interim 100 head is skipped; RFC 9112 §5.2: obs-fold joins lines")
    func interimAndFolding() async throws {
        let outcome = try await Self.head("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nX-Fold: a\r\n \t b \r\nX-Empty:\r\nContent-Length: 2\r\n\r\n")
        #expect(outcome.head?.status == 200)
        #expect(outcome.head?.headers.first { $0.name == "X-Fold" }?.value == "a b")
        #expect(outcome.head?.headers.first { $0.name == "X-Empty" }?.value == "")
        #expect(outcome.head?.headers.contains { $0.name == "Continue" } == false)
        #expect(outcome.body == Data("ok".utf8))
    }

    @Test(
        "A line without a colon, or a name with a space, is a bad response",
        arguments: [
            "HTTP/1.1 200 OK\r\nNoColonHere\r\nContent-Length: 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 2\r\n\r\n",
        ])
    func malformed(raw: String) async throws {
        let outcome = try await Self.head(raw)
        guard case .failure(let error) = outcome.result else { Issue.record("expected a failure"); return }
        // Refused by libcurl (a line without a colon) or by our head parser
        // (a name with a space): a bad response either way, never another failure.
        #expect(error.failure == .badResponse, "\(error)")
    }
}
