import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// Request bodies from streams: the delegate's `needNewBodyStream`
/// for the first body of a streamed upload and again whenever the body is
/// sent anew, a stream whose bytes come slowly, and the failure when no new
/// stream comes.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct BodyStreamTests {
    /// Gives a fresh stream over `body` each time it is asked, counting, and
    /// answers Basic challenges with `user`/`secret`.
    final class StreamingDelegate: SessionDelegate {
        let body: Data
        let streams: Int
        private let state = Lock<(asked: Int, events: [String])>((0, []))
        private let completion = CompletionLatch()

        /// - Parameter streams: How many streams to give before answering nil.
        init(body: Data, streams: Int = .max) {
            self.body = body
            self.streams = streams
        }

        var asked: Int { state.withLock { $0.asked } }
        var events: [String] { state.withLock { $0.events } }

        func urlSession(_ session: Session, needNewBodyStreamForTask task: SessionTask) async -> InputStream? {
            let give = state.withLock { state -> Bool in
                state.asked += 1
                state.events.append("need stream")
                return state.asked <= streams
            }
            return give ? InputStream(data: body) : nil
        }

        func urlSession(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge) async -> ChallengeAnswer {
            state.withLock { $0.events.append("challenge") }
            return use(Credential(user: "user", password: "secret", persistence: .none))
        }

        func urlSession(_ session: Session, task: SessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
            state.withLock { state in
                if state.events.last?.hasPrefix("sent") == true { state.events.removeLast() }
                state.events.append("sent \(totalBytesSent)/\(totalBytesExpectedToSend)")
            }
        }

        func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
            state.withLock { $0.events.append(CompletionLatch.event(error)) }
            completion.open()
        }

        func waitForCompletion() async { await completion.wait() }
    }

    static let body = Data(TestOrigin.pattern(offset: 0, count: 300_000))

    @Test("A streamed upload gets its first stream from the delegate and a new one to send again after a 401")
    func streamedUploadAfterChallenge() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/upload", Routes.basicAuth(realm: "r", user: "user", password: "secret", then: ScriptedResponse(body: "stored")))
        let delegate = StreamingDelegate(body: Self.body)
        let session = Session(configuration: .ephemeral, delegate: delegate)
        var request = URLRequest(url: origin.url("/upload"))
        request.httpMethod = "PUT"
        let task = session.uploadTask(withStreamedRequest: request)
        task.resume()
        await delegate.waitForCompletion()
        #expect(delegate.asked == 2)
        #expect(delegate.events.first == "need stream")
        #expect(delegate.events.contains("challenge"))
        #expect(delegate.events.last == "complete")
        #expect(delegate.events.dropLast().last == "sent 300000/-1")
        let requests = origin.requests(to: "/upload")
        #expect(requests.count == 2)
        #expect(requests.map(\.method) == ["PUT", "PUT"])
        // The length is unknown: HTTP/1.1 sends the body chunked, both times whole.
        #expect(requests.allSatisfy { $0.header("Transfer-Encoding") == "chunked" && $0.body == Array(Self.body) })
        // A PUT carries no form Content-Type the caller did not set (libcurl's POST path would add one).
        #expect(requests.allSatisfy { $0.header("Content-Type") == nil })
        #expect((task.response as? HTTPURLResponse)?.statusCode == 200)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A data task's httpBodyStream is its first body; a 307 that keeps POST asks the delegate for another")
    func requestStreamThenRedirect() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/old", Routes.redirect(to: "/new", status: 307))
        origin.route("/new") { request in ScriptedResponse(body: "got \(request.body.count)") }
        let delegate = StreamingDelegate(body: Self.body)
        let session = Session(configuration: .ephemeral, delegate: delegate)
        var request = URLRequest(url: origin.url("/old"))
        request.httpMethod = "POST"
        request.setValue(String(Self.body.count), forHTTPHeaderField: "Content-Length")
        request.httpBodyStream = InputStream(data: Self.body)
        session.dataTask(with: request).resume()
        await delegate.waitForCompletion()
        #expect(delegate.asked == 1)
        #expect(delegate.events.last == "complete")
        for path in ["/old", "/new"] {
            let sent = try #require(origin.requests(to: path).first)
            #expect(sent.method == "POST" && sent.body == Array(Self.body))
            // A declared length is sent as such, not chunked.
            #expect(sent.header("Content-Length") == "300000" && sent.header("Transfer-Encoding") == nil)
        }
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("When the body must be sent again and the delegate has no new stream, the task fails with requestBodyStreamExhausted")
    func noNewStream() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/upload", Routes.basicAuth(realm: "r", user: "user", password: "secret", then: ScriptedResponse(body: "stored")))
        let delegate = StreamingDelegate(body: Self.body, streams: 1)
        let session = Session(configuration: .ephemeral, delegate: delegate)
        session.uploadTask(withStreamedRequest: URLRequest(url: origin.url("/upload"))).resume()
        await delegate.waitForCompletion()
        #expect(delegate.asked == 2)
        #expect(delegate.events.last == "complete request body stream exhausted")
        #expect(origin.requests(to: "/upload").count == 1)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A stream whose bytes come slowly (a FIFO written in pieces) is sent whole, the transfer pausing while it waits")
    func slowStream() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/upload") { request in ScriptedResponse(body: "got \(request.body.count)") }
        let directory = TemporaryDirectory()
        let fifo = directory.url.appendingPathComponent("body.fifo")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        let body = Data(TestOrigin.pattern(offset: 7, count: 2_000_000))
        // The writer blocks in open until the session's reader opens the FIFO.
        let writer = Thread {
            guard let handle = FileHandle(forWritingAtPath: fifo.path) else { return }
            var offset = 0
            while offset < body.count {
                let end = min(body.count, offset + 10_000)
                handle.write(body.subdata(in: offset..<end))
                offset = end
            }
            try? handle.close()
        }
        writer.start()
        let session = Session(configuration: .ephemeral)
        var request = URLRequest(url: origin.url("/upload"))
        request.httpMethod = "POST"
        request.httpBodyStream = InputStream(fileAtPath: fifo.path)
        let (data, response) = try await session.data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: data, as: UTF8.self) == "got 2000000")
        #expect(origin.requests(to: "/upload").first?.body == Array(body))
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}

/// multipart/x-mixed-replace: a didReceiveResponse as each part
/// begins, then that part's bytes.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct MixedReplaceTests {
    static let wire =
        "--frame\r\nContent-Type: text/plain\r\n\r\none\r\n"
        + "--frame\r\nContent-Type: text/html\r\nX-Part: 2\r\n\r\n<b>two</b>\r\n"
        + "--frame\r\nContent-Type: application/json\r\n\r\n{\"n\":3}\r\n--frame--\r\n"

    /// Records each part's response and bytes.
    final class PartsDelegate: SessionDelegate {
        let cancelAtPart: Int?
        private let state = Lock<(parts: [(type: String, extra: String?, body: Data)], events: [String])>(([], []))
        let completion = CompletionLatch()
        init(cancelAtPart: Int? = nil) { self.cancelAtPart = cancelAtPart }
        var parts: [(type: String, extra: String?, body: Data)] { state.withLock { $0.parts } }
        var events: [String] { state.withLock { $0.events } }

        func urlSession(_ session: Session, dataTask: SessionTask, didReceive response: URLResponse) async -> Session.ResponseDisposition {
            let http = response as? HTTPURLResponse
            let count = state.withLock { state -> Int in
                state.parts.append((http?.value(forHTTPHeaderField: "Content-Type") ?? "", http?.value(forHTTPHeaderField: "X-Part"), Data()))
                state.events.append("response \(http?.statusCode ?? 0)")
                return state.parts.count
            }
            return count == cancelAtPart ? .cancel : .allow
        }

        func urlSession(_ session: Session, dataTask: SessionTask, didReceive data: Data) {
            state.withLock { state in
                guard !state.parts.isEmpty else {
                    state.events.append("data before any response")
                    return
                }
                if state.events.last != "data" { state.events.append("data") }
                state.parts[state.parts.count - 1].body.append(data)
            }
        }

        func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
            state.withLock { $0.events.append(CompletionLatch.event(error)) }
            completion.open()
        }

        func waitForCompletion() async { await completion.wait() }
    }

    static func route(_ origin: TestOrigin) {
        // Each part in pieces with pauses between, as a camera would send them.
        let bytes = Array(wire.utf8)
        var parts: [ScriptedResponse.Part] = []
        var offset = 0
        for size in [5, 30, 17, 40, 3, 60] where offset < bytes.count {
            let end = min(bytes.count, offset + size)
            parts += [.bytes(Array(bytes[offset..<end])), .pause(.milliseconds(20))]
            offset = end
        }
        if offset < bytes.count { parts.append(.bytes(Array(bytes[offset...]))) }
        origin.route(
            "/camera",
            response: ScriptedResponse(
                status: 200, headers: [HeaderField("Content-Type", "multipart/x-mixed-replace; boundary=\"frame\"")],
                parts: parts, framing: .chunked))
    }

    @Test("A three-part x-mixed-replace response gives three didReceiveResponse calls, each followed by its part's bytes")
    func threeParts() async throws {
        let origin = try await TestOrigin.start()
        Self.route(origin)
        let delegate = PartsDelegate()
        let session = Session(configuration: .ephemeral, delegate: delegate)
        session.dataTask(with: origin.url("/camera")).resume()
        await delegate.waitForCompletion()
        #expect(delegate.events == ["response 200", "data", "response 200", "data", "response 200", "data", "complete"])
        let parts = delegate.parts
        #expect(parts.map(\.type) == ["text/plain", "text/html", "application/json"])
        #expect(parts.map(\.extra) == [nil, "2", nil])
        #expect(parts.map { String(decoding: $0.body, as: UTF8.self) } == ["one", "<b>two</b>", "{\"n\":3}"])
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Cancelling at the second part's response ends the task; no byte of the second part is delivered")
    func cancelAtSecondPart() async throws {
        let origin = try await TestOrigin.start()
        Self.route(origin)
        let delegate = PartsDelegate(cancelAtPart: 2)
        let session = Session(configuration: .ephemeral, delegate: delegate)
        session.dataTask(with: origin.url("/camera")).resume()
        await delegate.waitForCompletion()
        #expect(delegate.events == ["response 200", "data", "response 200", "complete cancelled"])
        #expect(delegate.parts.count == 2 && delegate.parts[1].body.isEmpty)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A part with a malformed header line fails the task with badServerResponse at its URL, and the session goes on")
    func malformedPart() async throws {
        let origin = try await TestOrigin.start()
        let wire = "--frame\r\nContent-Type: text/plain\r\n\r\none\r\n--frame\r\nno colon here\r\n\r\ntwo\r\n--frame--\r\n"
        origin.route(
            "/broken",
            response: ScriptedResponse(
                status: 200, headers: [HeaderField("Content-Type", "multipart/x-mixed-replace; boundary=frame")],
                parts: [.bytes(Array(wire.utf8))], framing: .chunked))
        origin.route("/after", response: ScriptedResponse(status: 200, body: "ok"))
        let delegate = PartsDelegate()
        let session = Session(configuration: .ephemeral, delegate: delegate)
        defer { session.invalidateAndCancel() }
        let task = session.dataTask(with: origin.url("/broken"))
        task.resume()
        let completed = await bounded(delegate.completion, "didCompleteWithError of the malformed response")
        guard completed else { return }  // the transport's thread is stuck: nothing more answers
        let error = task.error as? URLError
        #expect(error?.code == .badServerResponse && error?.failingURL == origin.url("/broken"), "\(String(describing: error))")
        #expect(delegate.events.last?.hasPrefix("complete") == true && delegate.events.filter { $0.hasPrefix("complete") }.count == 1, "\(delegate.events)")
        // The transport's thread still runs: another request is answered.
        let (data, _) = try await session.data(from: origin.url("/after"))
        #expect(String(decoding: data, as: UTF8.self) == "ok")
        try await origin.shutdown()
    }

    @Test("The parser gives the same parts fed byte by byte or at once, and refuses a header block without end")
    func parser() throws {
        func parse(_ wire: [UInt8], step: Int) throws -> [MixedReplaceParser.Event] {
            var parser = MixedReplaceParser(boundary: "frame")
            var events: [MixedReplaceParser.Event] = []
            var offset = 0
            while offset < wire.count {
                let end = min(wire.count, offset + step)
                events += try wire[offset..<end].withUnsafeBytes { try parser.feed($0) }
                offset = end
            }
            return events + parser.finish()
        }
        // Adjacent data events joined, so that chunking does not matter.
        func joined(_ events: [MixedReplaceParser.Event]) -> [MixedReplaceParser.Event] {
            var result: [MixedReplaceParser.Event] = []
            for event in events {
                if case .data(let more) = event, case .data(let before)? = result.last {
                    result[result.count - 1] = .data(before + more)
                } else {
                    result.append(event)
                }
            }
            return result
        }
        let wire = Array(("preamble to ignore" + "\r\n" + Self.wire + "epilogue").utf8)
        let whole = try parse(wire, step: wire.count)
        #expect(whole.count == 6)
        #expect(whole.first == .part([HeaderFields.Field("Content-Type", "text/plain")]))
        #expect(whole[1] == .data(Data("one".utf8)))
        for step in [1, 2, 7, 11] { #expect(try joined(parse(wire, step: step)) == whole) }
        // A body whose bytes look like a delimiter's start is kept whole.
        let tricky = Array("--frame\r\n\r\n\r\n--fram\r\n--frameX\r\n--frame--".utf8)
        for step in [1, 3, tricky.count] {
            #expect(try joined(parse(tricky, step: step)) == [.part([]), .data(Data("\r\n--fram\r\n--frameX".utf8))])
        }
        #expect(MixedReplaceParser.boundary(ofContentType: "multipart/x-mixed-replace;boundary=abc") == "abc")
        #expect(MixedReplaceParser.boundary(ofContentType: "multipart/mixed; boundary=abc") == nil)
        var endless = MixedReplaceParser(boundary: "b")
        let head = Array("--b\r\nX: ".utf8) + [UInt8](repeating: 0x61, count: MixedReplaceParser.maximumHeaderBytes + 10)
        #expect(throws: MixedReplaceParser.Failure.self) { try head.withUnsafeBytes { try endless.feed($0) } }
    }
}

extension CompletionLatch {
    /// How the delegates above record a completion.
    static func event(_ error: (any Error)?) -> String {
        error.map { "complete \(($0 as? URLError)?.sessionError?.code.description ?? "\($0)")" } ?? "complete"
    }
}
