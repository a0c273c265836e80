import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// swift-http-types' calls (`data(for: HTTPRequest)` and the rest, shaped as
/// `HTTPTypesFoundation`'s `URLSession` extension) against the loopback
/// origin: the response is the head as the server sent it.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct HTTPTypesTests {
    static func session(configure: (inout SessionConfiguration) -> Void = { _ in }) -> Session {
        var configuration = SessionConfiguration.ephemeral
        // Responses wait at gates the test opens, and bodies come from its tasks.
        configuration.timeoutIntervalForRequest = TestTimeouts.request
        configure(&configuration)
        return Session(configuration: configuration)
    }

    static func request(_ method: HTTPRequest.Method = .get, _ origin: TestOrigin, _ path: String, fields: HTTPFields = [:]) -> HTTPRequest {
        let url = origin.url(path)
        return HTTPRequest(method: method, scheme: "http", authority: "\(url.host ?? ""):\(url.port ?? 0)", path: path, headerFields: fields)
    }

    /// A response whose fields repeat a name, out of alphabetical order,
    /// with a reason phrase of its own.
    static let fieldsResponse = ScriptedResponse(
        status: 201, reason: "Made Just Now",
        headers: [
            HeaderField("Set-Cookie", "a=1"), HeaderField("X-Zulu", "last by name, second on the wire"), HeaderField("Set-Cookie", "b=2"),
            HeaderField("Alpha-Field", "first by name"), HeaderField("Set-Cookie", "c=3"),
        ], parts: [.bytes(Array("made".utf8))])

    @Test("data(for: HTTPRequest): fields in wire order, each Set-Cookie its own field, the server's reason phrase; repeated request fields joined")
    func dataKeepsTheHead() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/made", response: Self.fieldsResponse)
        let session = Self.session()
        var fields = HTTPFields()
        fields.append(HTTPField(name: .accept, value: "text/plain"))
        fields.append(HTTPField(name: HTTPField.Name("X-Twice")!, value: "1"))
        fields.append(HTTPField(name: HTTPField.Name("X-Twice")!, value: "2"))
        fields.append(HTTPField(name: .cookie, value: "k=v"))
        fields.append(HTTPField(name: .cookie, value: "l=w"))
        let (data, response) = try await session.data(for: Self.request(.get, origin, "/made?q=1", fields: fields))
        #expect(data == Data("made".utf8))
        #expect(response.status.code == 201)
        // `Status ==` compares codes only: the phrase is checked on its own.
        #expect(response.status.reasonPhrase == "Made Just Now")
        #expect(response.headerFields[values: .setCookie] == ["a=1", "b=2", "c=3"])
        let names = response.headerFields.map(\.name.canonicalName)
        let order = ["set-cookie", "x-zulu", "set-cookie", "alpha-field", "set-cookie"]
        #expect(Array(names.filter { order.contains($0) }) == order, "\(names)")
        let sent = try #require(origin.requests(to: "/made").first)
        #expect(sent.target == "/made?q=1")
        #expect(sent.headers.filter { $0.name.lowercased() == "x-twice" }.map(\.value) == ["1, 2"])
        #expect(sent.headers.filter { $0.name.lowercased() == "cookie" }.map(\.value) == ["k=v; l=w"])
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("upload(for:from:), upload(for:fromFile:) and download(for:) take an HTTPRequest and return an HTTPResponse")
    func uploadsAndDownloads() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/up", response: ScriptedResponse(status: 200, reason: "Taken", headers: [HeaderField("X-Got", "yes")], parts: [.bytes(Array("stored".utf8))]))
        origin.route("/file", response: Self.fieldsResponse)
        let session = Self.session()
        let (data, response) = try await session.upload(for: Self.request(.put, origin, "/up"), from: Data("body one".utf8))
        #expect(data == Data("stored".utf8) && response.status.reasonPhrase == "Taken" && response.headerFields[HTTPField.Name("X-Got")!] == "yes")
        let folder = TemporaryDirectory()
        let source = URL(fileURLWithPath: folder.path("source"))
        try Data("body two".utf8).write(to: source)
        let (_, fromFile) = try await session.upload(for: Self.request(.post, origin, "/up"), fromFile: source)
        #expect(fromFile.status.code == 200)
        let uploads = origin.requests(to: "/up")
        #expect(uploads.map(\.method) == ["PUT", "POST"])
        #expect(uploads.map { String(decoding: $0.body, as: UTF8.self) } == ["body one", "body two"])
        let (location, downloaded) = try await session.download(for: Self.request(.get, origin, "/file"))
        defer { try? FileManager.default.removeItem(at: location) }
        #expect(try Data(contentsOf: location) == Data("made".utf8))
        #expect(downloaded.status.reasonPhrase == "Made Just Now" && downloaded.headerFields[values: .setCookie] == ["a=1", "b=2", "c=3"])
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("bytes(for: HTTPRequest): the head as sent at once, then the body as lines across chunks, characters and scalars")
    func bytesAsText() async throws {
        let origin = try await TestOrigin.start()
        // Line breaks of every kind, one of them split between two writes.
        let gate = OriginGate()
        origin.route(
            "/lines",
            response: ScriptedResponse(
                status: 200, reason: "Streaming", headers: [HeaderField("Set-Cookie", "a=1"), HeaderField("Set-Cookie", "b=2")],
                parts: [.bytes(Array("first\r\nsecond\r".utf8)), .waitFor(gate), .bytes(Array("\nthird\u{2028}fourth".utf8))], framing: .chunked))
        origin.route("/text", response: ScriptedResponse(parts: [.bytes(Array("e\u{301}\u{1F600}".utf8))]))
        let session = Self.session()
        let (stream, head) = try await session.bytes(for: Self.request(.get, origin, "/lines"))
        // The head came before the body's end.
        #expect(head.status.reasonPhrase == "Streaming" && head.headerFields[values: .setCookie] == ["a=1", "b=2"])
        var lines: [String] = []
        for try await line in stream.lines {
            lines.append(line)
            if lines.count == 1 { gate.open() }
        }
        #expect(lines == ["first", "second", "third", "fourth"])
        let (text, _) = try await session.bytes(for: Self.request(.get, origin, "/text"))
        var characters: [Character] = []
        for try await character in text.characters { characters.append(character) }
        #expect(characters == ["e\u{301}", "\u{1F600}"])
        let (again, _) = try await session.bytes(from: origin.url("/text"))
        var scalars: [Unicode.Scalar] = []
        for try await scalar in again.unicodeScalars { scalars.append(scalar) }
        #expect(scalars == ["e", "\u{301}", "\u{1F600}"])
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("No HTTPURLResponse is built on these paths when nobody asks for one, a metrics delegate included; the metrics build it once when read (counted in a process of its own)")
    func noFoundationResponse() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/count", response: Self.fieldsResponse)
        let result = try await ChildProcess.run(ChildProcess.helper, ["http-types-responses", origin.url("/count").absoluteString])
        #expect(result.status == 0, "\(result.standardError)")
        // Five calls build none (one with a delegate that keeps the metrics),
        // reading the metrics' response twice builds one, data(from:) its own.
        #expect(result.standardOutput.split(separator: "\n") == ["built 0", "built 1", "built 2"], "\(result.standardOutput)")
        try await origin.shutdown()
    }

    @Test(
        "A request without a scheme, authority or path, for the server itself (OPTIONS *) or a tunnel (CONNECT), or with a space or control byte in its path or authority, fails with badURL and sends nothing"
    )
    func badRequests() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/a b", response: ScriptedResponse(body: "reached"))
        let session = Self.session()
        let url = origin.url("/")
        let authority = "\(url.host ?? ""):\(url.port ?? 0)"
        let requests = [
            HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/x"),
            HTTPRequest(method: .get, scheme: "http", authority: nil, path: "/x"),
            HTTPRequest(method: .get, scheme: "http", authority: authority, path: "/a b"),
            HTTPRequest(method: .get, scheme: "http", authority: authority, path: "/a\u{01}b"),
            // (Leading and trailing spaces and control bytes HTTPRequest removes itself.)
            HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1 :\(url.port ?? 0)", path: "/x"),
            // Requests for no resource: the server itself, a tunnel, no path at all.
            HTTPRequest(method: .options, scheme: "http", authority: authority, path: "*"),
            HTTPRequest(method: .connect, scheme: "http", authority: authority, path: "/"),
            HTTPRequest(method: .get, scheme: "http", authority: authority, path: nil),
        ]
        for request in requests {
            do {
                _ = try await session.data(for: request)
                Issue.record("sent \(request)")
            } catch let error as URLError {
                #expect(error.code == .badURL, "\(request)")
            }
        }
        #expect(origin.requests.isEmpty)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A task's httpResponse, originalHTTPRequest and currentHTTPRequest; a response the cache serves comes back too")
    func taskProperties() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/from", response: ScriptedResponse(status: 302, headers: [HeaderField("Location", "/made")]))
        origin.route("/made", response: Self.fieldsResponse)
        origin.route("/kept", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600"), HeaderField("X-Kept", "1")], body: "kept"))
        let session = Self.session { $0.urlCache = ResponseCache(memoryCapacity: 1 << 20) }
        var request = URLRequest(url: origin.url("/from"))
        request.setValue("yes", forHTTPHeaderField: "X-Asked")
        let done = AsyncStream<Void>.makeStream()
        let task = session.dataTask(with: request) { _, _, _ in done.continuation.finish() }
        task.resume()
        for await _ in done.stream {}
        #expect(task.originalHTTPRequest?.path == "/from" && task.originalHTTPRequest?.headerFields[HTTPField.Name("X-Asked")!] == "yes")
        #expect(task.currentHTTPRequest?.path == "/made")
        let response = try #require(task.httpResponse)
        #expect(response.status.code == 201 && response.status.reasonPhrase == "Made Just Now")
        #expect(response.headerFields[values: .setCookie] == ["a=1", "b=2", "c=3"])
        // The second is served from the memory tier, which keeps Foundation's response.
        for _ in 0..<2 {
            let (data, kept) = try await session.data(for: Self.request(.get, origin, "/kept"))
            #expect(data == Data("kept".utf8) && kept.status == .ok && kept.headerFields[HTTPField.Name("X-Kept")!] == "1")
        }
        #expect(origin.requests(to: "/kept").count == 1)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    /// Hears interim responses in one form or both.
    final class InterimDelegate: SessionTaskDelegate {
        let heard = Lock<[String]>([])
        let alsoFoundation: Bool
        init(alsoFoundation: Bool) { self.alsoFoundation = alsoFoundation }
        func urlSession(_ session: Session, task: SessionTask, didReceiveInformationalResponse response: HTTPResponse) {
            let links = response.headerFields[values: .init("Link")!].joined(separator: ",")
            heard.withLock { $0.append("\(response.status.code) \(response.status.reasonPhrase) \(links)") }
        }
        func urlSession(_ session: Session, task: SessionTask, didReceiveInformationalResponse response: HTTPURLResponse) {
            guard alsoFoundation else { return DelegateFallback.unhandled() }
            heard.withLock { $0.append("foundation \(response.statusCode)") }
        }
    }

    @Test("Interim responses reach a delegate as HTTPResponse, in order, fields and reason phrase as sent; that form replaces Foundation's")
    func informationalAsHTTPResponse() async throws {
        let origin = try await TestOrigin.start()
        var hinted = ScriptedResponse(body: "ok")
        hinted.rawHead = Array(
            ("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nLink: </b.js>; rel=preload\r\n\r\n"
                + "HTTP/1.1 103 Hints Again\r\nLink: </c.png>\r\n\r\n"
                + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n").utf8)
        origin.route("/hinted", response: hinted)
        let session = Self.session()
        for alsoFoundation in [false, true] {
            let delegate = InterimDelegate(alsoFoundation: alsoFoundation)
            let (data, response) = try await session.data(for: Self.request(.get, origin, "/hinted"), delegate: delegate)
            #expect(data == Data("ok".utf8) && response.status == .ok)
            #expect(
                delegate.heard.withLock { $0 } == [
                    "103 Early Hints </a.css>; rel=preload,</b.js>; rel=preload", "103 Hints Again </c.png>",
                ])
        }
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    final class TrailerDelegate: SessionDataDelegate {
        let heard = Lock<[String]>([])
        /// On a connection of the session's own (its HTTP/1 reader), not libcurl's.
        let ownConnection: Bool
        init(ownConnection: Bool) { self.ownConnection = ownConnection }
        var mayBecomeStream: Bool { ownConnection }
        func urlSession(_ session: Session, dataTask: SessionDataTask, didReceive data: Data) {
            heard.withLock { $0.append("data \(String(decoding: data, as: UTF8.self))") }
        }
        func urlSession(_ session: Session, task: SessionTask, didReceiveTrailers trailers: HTTPFields) {
            heard.withLock { $0.append(trailers.map { "\($0.name.rawName)=\($0.value)" }.joined(separator: ",")) }
        }
    }

    @Test("A chunked body's trailers reach the delegate as HTTPFields after the body, apart from the head's fields")
    func trailersToTheDelegate() async throws {
        let origin = try await TestOrigin.start()
        var response = ScriptedResponse(parts: [.bytes(Array("5\r\nhello\r\n0\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n".utf8))], framing: .none)
        response.rawHead = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum, X-Other\r\n\r\n".utf8)
        origin.route("/trailers", response: response)
        let session = Self.session()
        for ownConnection in [false, true] {
            let delegate = TrailerDelegate(ownConnection: ownConnection)
            let (data, head) = try await session.data(for: Self.request(.get, origin, "/trailers"), delegate: delegate)
            #expect(data == Data("hello".utf8))
            #expect(head.headerFields[.init("X-Checksum")!] == nil && head.headerFields[.init("Trailer")!] == "X-Checksum, X-Other")
            #expect(delegate.heard.withLock { $0 } == ["X-Checksum=abc,X-Other=1"], "own connection: \(ownConnection)")
        }
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
