import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import OpenAPIRuntime
import Testing
import TestSupport
import URLLoading
@testable import URLLoadingOpenAPI

/// `SessionTransport` against the loopback origin, as a generated client
/// calls it: a path-only request and a base URL.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(3)))) struct SessionTransportTests {
    static func request(_ method: HTTPRequest.Method, _ path: String) -> HTTPRequest {
        HTTPRequest(method: method, scheme: nil, authority: nil, path: path)
    }

    static func session() -> Session {
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = nil
        // Bodies come from the test's own tasks, and responses wait at gates it opens.
        configuration.timeoutIntervalForRequest = TestTimeouts.request
        return Session(configuration: configuration)
    }

    /// A one-shot body (iterable once), in chunks of `size`.
    static func oneShot(_ bytes: [UInt8], size: Int = 1000, length: HTTPBody.Length) -> HTTPBody {
        let chunks = stride(from: 0, to: bytes.count, by: size).map { bytes[$0..<min($0 + size, bytes.count)] }
        let stream = AsyncThrowingStream<ArraySlice<UInt8>, any Error> { continuation in
            for chunk in chunks { continuation.yield(chunk) }
            continuation.finish()
        }
        return HTTPBody(stream, length: length)
    }

    @Test("The base URL's path and the request's path and query make the URL; fields come in wire order, repeated fields apart, with the reason phrase")
    func getJoinsBaseURLAndKeepsFields() async throws {
        let origin = try await TestOrigin.start()
        origin.route(
            "/api/v1/pets",
            response: ScriptedResponse(
                status: 200, reason: "Fine Thanks",
                headers: [
                    HeaderField("Set-Cookie", "a=1"), HeaderField("X-Order", "first"), HeaderField("Set-Cookie", "b=2"),
                    HeaderField("Set-Cookie", "c=3"),
                ], parts: [.bytes(Array("[\"rex\"]".utf8))]))
        let transport = SessionTransport(session: Self.session())
        var request = Self.request(.get, "/pets?limit=2&tag=a%20b")
        request.headerFields[.accept] = "application/json"
        let (response, body) = try await transport.send(request, body: nil, baseURL: origin.url("/api/v1/"), operationID: "listPets")
        #expect(response.status.code == 200 && response.status.reasonPhrase == "Fine Thanks")
        #expect(response.headerFields[values: .setCookie] == ["a=1", "b=2", "c=3"])
        let names = response.headerFields.map(\.name.rawName).filter { ["Set-Cookie", "X-Order"].contains($0) }
        #expect(names == ["Set-Cookie", "X-Order", "Set-Cookie", "Set-Cookie"])
        #expect(body?.length == .known(7))
        let text = try await String(collecting: try #require(body), upTo: 1000)
        #expect(text == "[\"rex\"]")
        let seen = try #require(origin.requests(to: "/api/v1/pets").first)
        #expect(seen.target == "/api/v1/pets?limit=2&tag=a%20b")
        #expect(seen.header("Accept") == "application/json")
        try await origin.shutdown()
    }

    @Test("Joining: an IPv6 base keeps its brackets and port, a base without a path or a path without its slash joins with one slash")
    func joining() throws {
        let pets = try SessionTransport.request(Self.request(.get, "/pets?x=1"), baseURL: try #require(URL(string: "http://[::1]:8080/api/")))
        #expect(pets.scheme == "http" && pets.authority == "[::1]:8080" && pets.path == "/api/pets?x=1")
        let bare = try SessionTransport.request(Self.request(.get, "pets"), baseURL: try #require(URL(string: "https://example.com")))
        #expect(bare.scheme == "https" && bare.authority == "example.com" && bare.path == "/pets")
        #expect(throws: URLError.self) {
            try SessionTransport.request(Self.request(.get, "/pets"), baseURL: try #require(URL(string: "/relative/only")))
        }
    }

    @Test("The response body's length: from Content-Length read as the session reads it, unknown when encoded, disagreeing or malformed")
    func declaredLength() {
        func length(_ fields: [(HTTPField.Name, String)]) -> HTTPBody.Length {
            var response = HTTPResponse(status: .ok)
            for (name, value) in fields { response.headerFields.append(HTTPField(name: name, value: value)) }
            return SessionTransport.length(of: response)
        }
        #expect(length([(.contentLength, "7")]) == .known(7))
        #expect(length([(.contentLength, "7"), (.contentLength, "7")]) == .known(7))
        #expect(length([(.contentLength, "7"), (.contentLength, "8")]) == .unknown)
        #expect(length([(.contentLength, "7"), (.contentEncoding, "gzip")]) == .unknown)
        for bad in ["+7", "-1", "7a", "", "99999999999999999999"] { #expect(length([(.contentLength, bad)]) == .unknown, "\(bad)") }
        #expect(length([]) == .unknown)
    }

    @Test("A HEAD gives no body; a path with a space or a control byte is refused with badURL before anything is sent")
    func headAndBadPaths() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/thing", response: ScriptedResponse(status: 200, headers: [HeaderField("Content-Length", "5")], framing: .none))
        let transport = SessionTransport(session: Self.session())
        let (response, body) = try await transport.send(Self.request(.head, "/thing"), body: nil, baseURL: origin.baseURL, operationID: "head")
        #expect(response.status == .ok && body == nil)
        for path in ["/a b", "/a\u{01}b", "/a\rb"] {
            await #expect(throws: URLError.self) {
                do {
                    _ = try await transport.send(Self.request(.get, path), body: nil, baseURL: origin.baseURL, operationID: "bad")
                } catch let error as URLError {
                    #expect(error.code == .badURL)
                    throw error
                }
            }
        }
        #expect(origin.requests.count == 1)
        try await origin.shutdown()
    }

    @Test("A streamed body with a known length goes out with Content-Length, one of unknown length chunked; every byte arrives in order")
    func streamedUploads() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/upload") { request in ScriptedResponse(status: 201, body: "got \(request.bodyLength)") }
        let transport = SessionTransport(session: Self.session())
        let bytes = TestOrigin.pattern(offset: 0, count: 300_001)
        let known = Self.oneShot(bytes, size: 7_777, length: .known(Int64(bytes.count)))
        let (first, firstBody) = try await transport.send(Self.request(.post, "/upload"), body: known, baseURL: origin.baseURL, operationID: "up")
        #expect(first.status.code == 201)
        #expect(try await String(collecting: try #require(firstBody), upTo: 100) == "got 300001")
        let unknown = Self.oneShot(bytes, size: 65_536, length: .unknown)
        _ = try await transport.send(Self.request(.put, "/upload"), body: unknown, baseURL: origin.baseURL, operationID: "up")
        let seen = origin.requests(to: "/upload")
        #expect(seen.count == 2)
        #expect(seen.first?.header("Content-Length") == "300001" && seen.first?.header("Transfer-Encoding") == nil)
        #expect(seen.last?.header("Transfer-Encoding")?.lowercased() == "chunked" && seen.last?.header("Content-Length") == nil)
        #expect(seen.allSatisfy { $0.body == bytes })
        try await origin.shutdown()
    }

    @Test("A 307 resends a body that can be iterated again; a one-shot body fails with requestBodyStreamExhausted")
    func redirectWithBodies() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/old", Routes.redirect(to: "/new", status: 307))
        origin.route("/new") { request in ScriptedResponse(status: 200, body: "new got \(request.bodyLength)") }
        let transport = SessionTransport(session: Self.session())
        let bytes = Array("resend me".utf8)
        let replayable = HTTPBody(bytes)
        #expect(replayable.iterationBehavior == .multiple)
        let (response, body) = try await transport.send(Self.request(.post, "/old"), body: replayable, baseURL: origin.baseURL, operationID: "r")
        #expect(response.status.code == 200)
        #expect(try await String(collecting: try #require(body), upTo: 100) == "new got 9")
        #expect(origin.requests(to: "/new").first?.body == bytes && origin.requests(to: "/new").first?.method == "POST")

        let once = Self.oneShot(bytes, length: .known(Int64(bytes.count)))
        #expect(once.iterationBehavior == .single)
        await #expect(throws: URLError.self) {
            do {
                _ = try await transport.send(Self.request(.post, "/old"), body: once, baseURL: origin.baseURL, operationID: "r")
            } catch let error as URLError {
                #expect(error.code == .requestBodyStreamExhausted)
                throw error
            }
        }
        #expect(origin.requests(to: "/old").count == 2 && origin.requests(to: "/new").count == 1)
        try await origin.shutdown()
    }

    @Test("The session's cookies apply: a cookie set by one call goes with the next")
    func sessionCookiesApply() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/login", response: ScriptedResponse(status: 200, headers: [HeaderField("Set-Cookie", "session=abc; Path=/")], body: ""))
        origin.route("/me") { request in ScriptedResponse(status: 200, body: request.header("Cookie") ?? "none") }
        let transport = SessionTransport(session: Self.session())
        _ = try await transport.send(Self.request(.post, "/login"), body: HTTPBody("x"), baseURL: origin.baseURL, operationID: "login")
        let (_, body) = try await transport.send(Self.request(.get, "/me"), body: nil, baseURL: origin.baseURL, operationID: "me")
        #expect(try await String(collecting: try #require(body), upTo: 100) == "session=abc")
        try await origin.shutdown()
    }

    @Test("Cancelling the calling task cancels a call waiting for its head; cancelling the body's reader cancels the transfer mid-body")
    func cancellation() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/slow-head", response: ScriptedResponse(status: 200, body: "late").with(delayBeforeHead: .seconds(60)))
        let gate = OriginGate()
        origin.route("/half", response: ScriptedResponse(status: 200, parts: [.bytes(Array(repeating: 7, count: 1000)), .waitFor(gate)], framing: .chunked))
        let transport = SessionTransport(session: Self.session())
        let call = Task { try await transport.send(Self.request(.get, "/slow-head"), body: nil, baseURL: origin.baseURL, operationID: "slow") }
        #expect(await eventually { origin.requests(to: "/slow-head").count == 1 })
        call.cancel()
        let outcome = await call.result
        #expect(throws: URLError.self) {
            do { _ = try outcome.get() } catch let error as URLError {
                #expect(error.code == .cancelled)
                throw error
            }
        }

        let (_, body) = try await transport.send(Self.request(.get, "/half"), body: nil, baseURL: origin.baseURL, operationID: "half")
        let firstChunk = Lock(false)
        let reader = Task {
            var count = 0
            for try await chunk in try #require(body) {
                count += chunk.count
                firstChunk.withLock { $0 = true }
            }
            return count
        }
        #expect(await eventually { firstChunk.withLock { $0 } })
        reader.cancel()
        let read = await reader.result
        #expect(throws: URLError.self) {
            do { _ = try read.get() } catch let error as URLError {
                #expect(error.code == .cancelled)
                throw error
            }
        }
        gate.open()
        try await origin.shutdown()
    }

    @Test("A slow reader pauses the transfer: the origin's writes wait for the client's window, the client holds a bounded part, and every byte arrives after")
    func slowReaderPausesTheTransfer() async throws {
        let origin = try await TestOrigin.start(ownThread: true)
        let size = 64 << 20
        origin.route("/big", response: ScriptedResponse(status: 200, parts: [.pattern(offset: 0, count: size)]))
        let session = Self.session()
        let transport = SessionTransport(session: session)
        let (_, body) = try await transport.send(Self.request(.get, "/big"), body: nil, baseURL: origin.baseURL, operationID: "big")
        var iterator = try #require(body).makeAsyncIterator()
        var received = try #require(try await iterator.next()).count
        // The reader stops here: the client's buffer fills (a mebibyte), the
        // transfer pauses, the sockets fill and the origin's write waits, for
        // good (a client reading on would take the whole body in well under
        // the second: a write then waits milliseconds).
        let task = try #require(session.allTasks.first)
        #expect(await eventually { origin.longestWaitingWrite > .seconds(1) && task.countOfBytesReceived >= 1 << 20 })
        // What the client took meanwhile: its buffer and libcurl's, not the body.
        #expect(task.countOfBytesReceived < 16 << 20, "\(task.countOfBytesReceived) bytes taken while the reader stopped")
        #expect(origin.bodyBytesWritten < 32 << 20, "the origin wrote \(origin.bodyBytesWritten) bytes")
        var offset = received
        var ordered = true
        while let chunk = try await iterator.next() {
            if ordered, !TestOrigin.isPattern(chunk, offset: offset) { ordered = false }
            offset += chunk.count
        }
        received = offset
        #expect(received == size && ordered)
        try await origin.shutdown()
    }

    struct Report: Decodable {
        var status: Int
        var received: Int
        var consistent: Bool
        var baselineKiB: Int
        var peakRSSKiB: Int
    }

    static let bigSize = 256 << 20
    static let rssOverBaselineKiB = Sanitizer.memoryBound(kilobytes: 64 * 1024)

    static func runHelper(_ arguments: [String]) async throws -> Report {
        let result = try await ChildProcess.run(ChildProcess.helper, ["openapi-transfer"] + arguments)
        #expect(result.status == 0, "\(result.standardError)")
        let line = try #require(result.standardOutput.split(separator: "\n").last, "no report: \(result.standardError)")
        return try JSONDecoder().decode(Report.self, from: Data(line.utf8))
    }

    @Test("256 MiB each way through the transport with peak RSS under 64 MiB over the baseline")
    func bigBodiesStream() async throws {
        let origin = try await TestOrigin.start(ownThread: true)
        origin.route("/download", response: ScriptedResponse(status: 200, parts: [.pattern(offset: 0, count: Self.bigSize)]))
        let directory = TemporaryDirectory()
        origin.storeBodies(of: "/upload", in: directory.url)
        origin.route("/upload") { request in ScriptedResponse(status: request.method == "PUT" ? 201 : 200, body: "stored \(request.bodyLength)") }

        let download = try await Self.runHelper(["download", origin.baseURL.absoluteString, "/download", String(Self.bigSize)])
        print("openapi transfer download-256m: peak RSS \(download.peakRSSKiB) KiB, baseline \(download.baselineKiB) KiB")
        #expect(download.status == 200 && download.received == Self.bigSize && download.consistent)
        #expect(download.peakRSSKiB - download.baselineKiB < Self.rssOverBaselineKiB)

        let upload = try await Self.runHelper(["upload", origin.baseURL.absoluteString, "/upload", String(Self.bigSize)])
        print("openapi transfer upload-256m: peak RSS \(upload.peakRSSKiB) KiB, baseline \(upload.baselineKiB) KiB")
        #expect(upload.status == 201)
        #expect(upload.peakRSSKiB - upload.baselineKiB < Self.rssOverBaselineKiB)
        let stored = try #require(origin.requests(to: "/upload").last)
        #expect(stored.method == "PUT" && stored.bodyLength == Self.bigSize && stored.header("Content-Length") == String(Self.bigSize))
        #expect(try TestOrigin.fileHoldsPattern(try #require(stored.bodyFile), count: Self.bigSize))
        try await origin.shutdown()
    }
}
