import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// The session manager against the loopback origin.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2)))) struct HTTPSessionManagerTests {
    struct User: Codable, Sendable, Equatable {
        var id: Int
        var name: String
    }

    static func manager(_ origin: TestOrigin) -> HTTPSessionManager {
        // Some responses wait at gates the tests open.
        let configuration = SessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = TestTimeouts.request
        return HTTPSessionManager(baseURL: origin.url("/api"), configuration: configuration)
    }

    static let json = [HeaderField("Content-Type", "application/json; charset=utf-8")]

    @Test("async GET: parameters in the query as the origin sees them, the body decoded; POST as a form, PUT as JSON, send(json:) from an Encodable")
    func verbsAsync() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/api/users", response: ScriptedResponse(headers: Self.json, body: #"[{"id":1,"name":"Ann"},{"id":2,"name":"Bo"}]"#))
        origin.route("/api/echo") { request in
            ScriptedResponse(headers: Self.json, body: #"{"id":3,"name":"\#(request.method) \#(request.header("Content-Type") ?? "-")"}"#)
        }
        let manager = Self.manager(origin)
        defer { manager.invalidateSession(cancelingTasks: true) }
        let users = try await manager.get("users", parameters: ["page": 2, "sort": "name asc"], as: [User].self)
        #expect(users == [User(id: 1, name: "Ann"), User(id: 2, name: "Bo")])
        #expect(origin.requests(to: "/api/users").last?.target == "/api/users?page=2&sort=name%20asc")
        let posted = try await manager.send(.post, "echo", parameters: ["a": 1, "b": "x y"], as: User.self)
        #expect(posted.name == "POST application/x-www-form-urlencoded")
        #expect(origin.requests(to: "/api/echo").last.map { String(decoding: $0.body, as: UTF8.self) } == "a=1&b=x%20y")
        manager.requestSerializer.encoding = .json
        _ = try await manager.send(.put, "echo", parameters: ["list": [1, 2]], as: User.self)
        #expect(origin.requests(to: "/api/echo").last.map { String(decoding: $0.body, as: UTF8.self) } == #"{"list":[1,2]}"#)
        let created = try await manager.send(.patch, "echo", json: User(id: 9, name: "Cy"), as: User.self)
        #expect(created.name == "PATCH application/json")
        #expect(origin.requests(to: "/api/echo").last.flatMap { try? JSONValue(data: Data($0.body)) } == .object(["id": .number(9), "name": .string("Cy")]))
        try await origin.shutdown()
    }

    @Test("Validation: a 404's error carries the response and the body; a wrong media type and an undecodable body fail with theirs; nothing is thrown away")
    func validation() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/api/missing", response: ScriptedResponse(status: 404, headers: Self.json, body: #"{"error":"no such user"}"#))
        origin.route("/api/html", response: ScriptedResponse(headers: [HeaderField("Content-Type", "text/html")], body: "<p>hi</p>"))
        origin.route("/api/bad", response: ScriptedResponse(headers: Self.json, body: #"{"id":"one"}"#))
        let manager = Self.manager(origin)
        defer { manager.invalidateSession(cancelingTasks: true) }
        let missing = await #expect(throws: ManagerError.self) { try await manager.get("missing", as: User.self) }
        #expect(missing?.kind == .unacceptableStatusCode(404) && missing?.response?.statusCode == 404)
        #expect(missing?.data.flatMap { try? JSONValue(data: $0) }?["error"]?.stringValue == "no such user")
        let html = await #expect(throws: ManagerError.self) { try await manager.get("html") }
        #expect(html?.kind == .unacceptableContentType("text/html") && html?.data == Data("<p>hi</p>".utf8))
        let bad = await #expect(throws: ManagerError.self) { try await manager.get("bad", as: User.self) }
        #expect(bad?.kind == .serializationFailed && bad?.underlying is DecodingError && bad?.data == Data(#"{"id":"one"}"#.utf8))
        #expect(!"\(String(describing: missing))".contains("no such user"), "descriptions leave the body out")
        try await origin.shutdown()
    }

    @Test("Empty bodies: a 204 reads as JSON null and as an Optional; HEAD succeeds without a body; text in its charset")
    func emptyBodiesAndText() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/api/none", response: ScriptedResponse(status: 204, body: ""))
        origin.route("/api/latin", response: ScriptedResponse(headers: [HeaderField("Content-Type", "text/plain; charset=ISO-8859-1")], body: [0x63, 0x61, 0x66, 0xE9]))
        let manager = Self.manager(origin)
        defer { manager.invalidateSession(cancelingTasks: true) }
        #expect(try await manager.get("none") == .null)
        let optional = try await manager.get("none", as: User?.self)
        #expect(optional == nil)
        let text = try await manager.request(.get, "latin", serializer: StringResponseSerializer()).value
        #expect(text == "café")
        let headed = CompletionLatch()
        let outcome = Lock<String>("")
        manager.head(
            "latin",
            success: { _ in
                outcome.withLock { $0 = "ok" }; headed.open()
            },
            failure: { _, error in
                outcome.withLock { $0 = "\(error)" }; headed.open()
            })
        await headed.wait()
        #expect(outcome.withLock { $0 } == "ok")
        #expect(origin.requests(to: "/api/latin").last?.method == "HEAD")
        try await origin.shutdown()
    }

    @Test("Closure verbs: success with the task and the value, failure before sending for bad parameters (no task, no request), progress totals rising to the body's size")
    func closures() async throws {
        let origin = try await TestOrigin.start()
        let size = 1 << 20
        origin.route("/api/big", response: ScriptedResponse(headers: [HeaderField("Content-Type", "application/octet-stream")], body: TestOrigin.pattern(offset: 0, count: size)))
        origin.route("/api/ok", response: ScriptedResponse(headers: Self.json, body: #"{"ok":true}"#))
        let manager = Self.manager(origin)
        defer { manager.invalidateSession(cancelingTasks: true) }
        let done = CompletionLatch()
        let seen = Lock<(value: JSONValue?, task: Int?, failure: ManagerError?)>((nil, nil, nil))
        let task = manager.get(
            "ok",
            success: { task, value in
                seen.withLock {
                    $0.value = value; $0.task = task.taskIdentifier
                }; done.open()
            },
            failure: { _, error in
                seen.withLock { $0.failure = error }; done.open()
            })
        await done.wait()
        #expect(seen.withLock { $0.value?["ok"] } == .bool(true) && seen.withLock { $0.task } == task?.taskIdentifier)
        let refused = CompletionLatch()
        let refusal = Lock<(task: SessionTask?, error: ManagerError?)>((nil, nil))
        let none = manager.post(
            "ok", parameters: ["at": Date()], success: nil,
            failure: { task, error in
                refusal.withLock { $0 = (task, error) }; refused.open()
            })
        await refused.wait()
        #expect(none == nil && refusal.withLock { $0.task } == nil && refusal.withLock { $0.error?.kind } == .parameterEncodingFailed)
        #expect(origin.requests(to: "/api/ok").count == 1, "nothing was sent for the refused request")
        let totals = Lock<[Int64]>([])
        let finished = CompletionLatch()
        manager.dataTask(
            .get, "big", serializer: DataResponseSerializer(), downloadProgress: { progress in totals.withLock { $0.append(progress.completedUnitCount) } },
            success: { _, data in
                #expect(data.count == size); finished.open()
            },
            failure: { _, error in
                Issue.record("\(error)"); finished.open()
            })
        await finished.wait()
        let reported = totals.withLock { $0 }
        #expect(!reported.isEmpty && reported == reported.sorted() && reported.last == Int64(size), "\(reported.count) reports, last \(reported.last ?? -1)")
        try await origin.shutdown()
    }

    @Test("Multipart POST built in a closure and streamed from a file: the origin gets the fields and the file; upload progress rises to the body's length")
    func multipart() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/api/upload") { request in ScriptedResponse(headers: Self.json, body: #"{"bytes":\#(request.bodyLength)}"#) }
        let manager = Self.manager(origin)
        defer { manager.invalidateSession(cancelingTasks: true) }
        let directory = TemporaryDirectory()
        let photo = directory.url.appendingPathComponent("photo.bin")
        let bytes = TestOrigin.pattern(offset: 5, count: 300_000)
        try Data(bytes).write(to: photo)
        let done = CompletionLatch()
        let result = Lock<(JSONValue?, [Int64])>((nil, []))
        manager.post(
            "upload", parameters: ["author": "Ann"],
            constructingBody: { form in try form.appendFile(at: photo, name: "photo", mimeType: "application/octet-stream") },
            progress: { progress in result.withLock { $0.1.append(progress.completedUnitCount) } },
            success: { _, value in
                result.withLock { $0.0 = value }; done.open()
            },
            failure: { _, error in
                Issue.record("\(error)"); done.open()
            })
        await done.wait()
        let request = try #require(origin.requests(to: "/api/upload").last)
        #expect(request.header("Content-Type")?.hasPrefix("multipart/form-data; boundary=") == true)
        let body = Data(request.body)
        #expect(body.range(of: Data("name=\"author\"\r\n\r\nAnn\r\n".utf8)) != nil)
        #expect(body.range(of: Data(bytes)) != nil, "the file's bytes, whole")
        let (value, sent) = result.withLock { $0 }
        #expect(value?["bytes"]?.numberValue == Double(request.bodyLength))
        #expect(sent == sent.sorted() && sent.last == Int64(request.bodyLength))
        try await origin.shutdown()
    }

    @Test("A download is moved where the destination says (folders made); a Progress's cancel cancels its task; a cancelled async call cancels its request")
    func downloadsAndProgressControl() async throws {
        let origin = try await TestOrigin.start()
        let size = 2 << 20
        origin.route("/api/file", response: ScriptedResponse(body: TestOrigin.pattern(offset: 0, count: size)))
        let gate = OriginGate()
        defer { gate.open() }
        origin.route("/api/slow", response: ScriptedResponse(parts: [.pattern(offset: 0, count: 1000), .waitFor(gate), .pattern(offset: 1000, count: 1000)], framing: .declaredLength(2000)))
        let manager = Self.manager(origin)
        defer { manager.invalidateSession(cancelingTasks: true) }
        let directory = TemporaryDirectory()
        let target = directory.url.appendingPathComponent("nested/dir/file.bin")
        let (file, response) = try await manager.download("file", destination: { _, _ in target })
        #expect(file == target && response.statusCode == 200)
        #expect(try Data(contentsOf: target) == Data(TestOrigin.pattern(offset: 0, count: size)))
        // Cancelling the task's Progress cancels the task.
        let started = CompletionLatch()
        let ended = CompletionLatch()
        let failure = Lock<ManagerError?>(nil)
        let task = manager.dataTask(
            .get, "slow", serializer: DataResponseSerializer(), downloadProgress: { _ in started.open() }, success: { _, _ in ended.open() },
            failure: { _, error in
                failure.withLock { $0 = error }; ended.open()
            })
        await started.wait()
        let progress = try #require(task.flatMap { manager.downloadProgress(for: $0) })
        progress.cancel()
        await ended.wait()
        #expect(failure.withLock { $0?.kind } == .transport && (failure.withLock { $0?.underlying } as? URLError)?.code == .cancelled)
        // Cancelling the Swift task cancels the request.
        let call = Task { try await manager.request(.get, "slow", serializer: DataResponseSerializer()) }
        #expect(await eventually { origin.requests(to: "/api/slow").count == 2 })
        call.cancel()
        let outcome = await call.result
        #expect(((try? outcome.get()) == nil))
        try await origin.shutdown()
    }
}
