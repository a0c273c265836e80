import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// `.becomeStream`: a data task on a connection of the
/// session's own continues as a stream task; the bytes after the head are
/// its first. And the same connection as a plain HTTP/1.1 client.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2))))
struct BecomeStreamTests {
    /// Answers every response with `disposition` and records every call.
    final class Delegate: SessionDataDelegate, SessionStreamDelegate, Sendable {
        let disposition: Session.ResponseDisposition
        let declares: Bool
        let calls = Lock<[String]>([])
        let body = Lock(Data())
        let stream = Lock<SessionStreamTask?>(nil)
        let completed = Lock<[String]>([])

        init(_ disposition: Session.ResponseDisposition, declares: Bool) {
            self.disposition = disposition
            self.declares = declares
        }

        var mayBecomeStream: Bool { declares }

        func urlSession(_ session: Session, dataTask: SessionTask, didReceive response: URLResponse) async -> Session.ResponseDisposition {
            calls.withLock { $0.append("response \((response as? HTTPURLResponse)?.statusCode ?? 0)") }
            return disposition
        }
        func urlSession(_ session: Session, dataTask: SessionTask, didReceive data: Data) {
            body.withLock { $0.append(data) }
        }
        func urlSession(_ session: Session, dataTask: SessionTask, didBecome streamTask: SessionStreamTask) {
            calls.withLock { $0.append("became stream") }
            stream.withLock { $0 = streamTask }
        }
        func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
            let text = error.map { "error \(($0 as? URLError)?.code.rawValue ?? 0) \($0)" } ?? "done"
            calls.withLock { $0.append("complete") }
            completed.withLock { $0.append(text) }
        }
    }

    static func read(_ task: SessionStreamTask, until end: String) async throws -> String {
        var data = Data()
        while !String(decoding: data, as: UTF8.self).contains(end) {
            let (chunk, atEOF) = try await task.readData(ofMinLength: 1, maxLength: 65536, timeout: 20)
            data.append(chunk ?? Data())
            if atEOF { break }
        }
        return String(decoding: data, as: UTF8.self)
    }

    @Test("becomeStream after a 200: the stream task's first bytes are the body; the connection goes on with a request written by hand; the data task hears nothing more")
    func afterOK() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/first", response: ScriptedResponse(body: "hello"))
        origin.route("/second", response: ScriptedResponse(body: "second answer"))
        let delegate = Delegate(.becomeStream, declares: true)
        let session = Session(configuration: .ephemeral, delegate: delegate)
        let task = session.dataTask(with: URLRequest(url: origin.url("/first")))
        task.resume()
        #expect(await eventually { delegate.stream.withLock { $0 != nil } })
        let stream = try #require(delegate.stream.withLock { $0 })
        #expect(stream.state == .running && stream.host == "127.0.0.1" && stream.port == origin.port)
        let (first, _) = try await stream.readData(ofMinLength: 5, maxLength: 5, timeout: StreamTaskTests.bound)
        #expect(first == Data("hello".utf8))
        try await stream.write(Data("GET /second HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8), timeout: 10)
        let answer = try await Self.read(stream, until: "second answer")
        #expect(answer.hasPrefix("HTTP/1.1 200") && answer.hasSuffix("second answer"))
        #expect(await eventually { task.state == SessionTask.State.completed })
        #expect(task.error == nil)
        #expect(delegate.calls.withLock { $0 } == ["response 200", "became stream"])
        #expect(delegate.body.withLock { $0 }.isEmpty)
        #expect(origin.requests.map(\.target) == ["/first", "/second"])
        stream.cancel()
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A 101 Switching Protocols to a request asking for an Upgrade: the bytes the server sent right behind its head are the stream task's first")
    func switchingProtocols() async throws {
        let origin = try await TestOrigin.start()
        origin.route(
            "/upgrade",
            response: ScriptedResponse(
                status: 101, headers: [HeaderField("Upgrade", "x-test"), HeaderField("Connection", "Upgrade")],
                parts: [.bytes(Array("greetings in x-test\r\n".utf8))], framing: .none))
        origin.route("/after", response: ScriptedResponse(body: "after the switch"))
        // No mayBecomeStream: the Upgrade field alone puts the request on the session's own connection.
        let delegate = Delegate(.becomeStream, declares: false)
        let session = Session(configuration: .ephemeral, delegate: delegate)
        var request = URLRequest(url: origin.url("/upgrade"))
        request.setValue("x-test", forHTTPHeaderField: "Upgrade")
        request.setValue("Upgrade", forHTTPHeaderField: "Connection")
        session.dataTask(with: request).resume()
        #expect(await eventually { delegate.stream.withLock { $0 != nil } })
        let stream = try #require(delegate.stream.withLock { $0 })
        #expect(try await Self.read(stream, until: "\r\n") == "greetings in x-test\r\n")
        try await stream.write(Data("GET /after HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8), timeout: 10)
        #expect(try await Self.read(stream, until: "after the switch").hasSuffix("after the switch"))
        #expect(delegate.calls.withLock { $0 } == ["response 101", "became stream"])
        stream.cancel()
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A delegate that may become a stream but allows: its own connection reads Content-Length, chunked and close-delimited bodies, sends a body, follows a redirect")
    func allowed() async throws {
        let origin = try await TestOrigin.start()
        let big = TestOrigin.pattern(offset: 0, count: 300_000)
        origin.route("/length", response: ScriptedResponse(body: big))
        origin.route("/chunked", response: ScriptedResponse(parts: [.bytes(Array("ab".utf8)), .pause(.milliseconds(10)), .bytes(Array("cde".utf8))], framing: .chunked))
        origin.route("/close", response: ScriptedResponse(parts: [.bytes(Array("until the end".utf8))], framing: .closeDelimited))
        origin.route("/moved", Routes.redirect(to: "/length"))
        origin.route("/post") { request in ScriptedResponse(body: "got \(request.body.count) bytes") }
        let cases: [(String, Data?, Data)] = [
            ("/length", nil, Data(big)), ("/chunked", nil, Data("abcde".utf8)), ("/close", nil, Data("until the end".utf8)),
            ("/moved", nil, Data(big)), ("/post", Data(repeating: 7, count: 70_000), Data("got 70000 bytes".utf8)),
        ]
        for (path, upload, expected) in cases {
            let delegate = Delegate(.allow, declares: true)
            let session = Session(configuration: .ephemeral, delegate: delegate)
            var request = URLRequest(url: origin.url(path))
            if let upload {
                request.httpMethod = "POST"
                request.httpBody = upload
            }
            session.dataTask(with: request).resume()
            #expect(await eventually { !delegate.completed.withLock { $0 }.isEmpty }, "\(path)")
            #expect(delegate.completed.withLock { $0 } == ["done"], "\(path)")
            #expect(delegate.body.withLock { $0 } == expected, "\(path)")
            session.finishTasksAndInvalidate()
        }
        // libcurl would have added "Accept: */*": these went on the session's own connections.
        #expect(origin.requests.count == 6 && origin.requests.allSatisfy { !$0.headers.contains { $0.name == "Accept" } })
        try await origin.shutdown()
    }

    @Test("becomeStream from a task on libcurl's connection fails the task with an error that says what is needed")
    func notOwned() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/plain", response: ScriptedResponse(body: "plain"))
        let delegate = Delegate(.becomeStream, declares: false)
        let session = Session(configuration: .ephemeral, delegate: delegate)
        session.dataTask(with: URLRequest(url: origin.url("/plain"))).resume()
        #expect(await eventually { !delegate.completed.withLock { $0 }.isEmpty })
        let text = try #require(delegate.completed.withLock { $0.first })
        #expect(text.contains("mayBecomeStream"))
        #expect(delegate.stream.withLock { $0 } == nil)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("On the session's own connection the resource timeout holds: a body that stops coming ends in timedOut")
    func resourceTimeout() async throws {
        let origin = try await TestOrigin.start()
        let gate = OriginGate()
        origin.route("/stalls", response: ScriptedResponse(parts: [.bytes(Array("a".utf8)), .waitFor(gate)], framing: .declaredLength(10)))
        let delegate = Delegate(.allow, declares: true)
        let configuration = SessionConfiguration.ephemeral
        configuration.timeoutIntervalForResource = 1
        let session = Session(configuration: configuration, delegate: delegate)
        session.dataTask(with: URLRequest(url: origin.url("/stalls"))).resume()
        #expect(await eventually { !delegate.completed.withLock { $0 }.isEmpty })
        #expect(delegate.completed.withLock { $0.first }?.hasPrefix("error \(URLError.Code.timedOut.rawValue)") == true, "\(delegate.completed.withLock { $0 })")
        gate.open()
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
