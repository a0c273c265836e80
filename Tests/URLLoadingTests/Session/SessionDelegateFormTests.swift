import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

// Content codings, progress, the completion-handler forms of delegate
// methods and becomeDownload: how a task's body reaches its delegate.
extension SessionTests {
    @Test("Gzip bodies are decoded; a body in a coding libcurl does not know arrives as it was sent, with its Content-Encoding")
    func contentCodings() async throws {
        let origin = try await TestOrigin.start()
        let gzipped: [UInt8] = [
            0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff, 0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0xd7, 0x51, 0x48, 0x49, 0x4d,
            0xce, 0x4f, 0x49, 0x4d, 0x51, 0x28, 0xcf, 0x2f, 0xca, 0x49, 0x01, 0x00, 0x43, 0xd0, 0xd9, 0xc8, 0x14, 0x00, 0x00, 0x00,
        ]
        origin.route("/gzip", response: ScriptedResponse(headers: [HeaderField("Content-Encoding", "gzip")], body: gzipped))
        origin.route("/unknown", response: ScriptedResponse(headers: [HeaderField("Content-Encoding", "x-custom")], body: "opaque bytes"))
        let session = try Self.session()
        let (decoded, _) = try await session.data(from: origin.url("/gzip"))
        #expect(String(decoding: decoded, as: UTF8.self) == "hello, decoded world")
        let (raw, response) = try await session.data(from: origin.url("/unknown"))
        #expect(String(decoding: raw, as: UTF8.self) == "opaque bytes")
        #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Content-Encoding") == "x-custom")
        // The handle goes back to the pool: the next transfer on it decodes again.
        let (again, _) = try await session.data(from: origin.url("/gzip"))
        #expect(String(decoding: again, as: UTF8.self) == "hello, decoded world")
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}

extension SessionTests {
    @Test("A task's Progress follows the bytes received against Content-Length and is whole at the end")
    func progress() async throws {
        let origin = try await TestOrigin.start()
        origin.route(
            "/body", response: ScriptedResponse(parts: [.bytes(Array(repeating: 1, count: 1000)), .pause(.milliseconds(10)), .bytes(Array(repeating: 2, count: 500))], framing: .contentLength))
        let delegate = RecordingDelegate()
        let session = try Self.session(delegate)
        let task = session.dataTask(with: URLRequest(url: origin.url("/body")))
        #expect(task.progress.completedUnitCount == 0)
        task.resume()
        await delegate.waitForCompletion()
        #expect(task.progress.totalUnitCount == 1500)
        #expect(task.progress.completedUnitCount == 1500)
        #expect(task.progress.fractionCompleted == 1)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    /// Implements only the completion-handler forms of the delegate methods.
    final class CompletionHandlerDelegate: SessionDelegate, Sendable {
        let (completions, completed) = AsyncStream<String>.makeStream()
        func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
            completed.yield(error.map { "\(($0 as? URLError)?.sessionError?.code.description ?? "?")" } ?? "ok")
        }
        func urlSession(
            _ session: Session, task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
            newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
        ) {
            DispatchQueue.global().async { completionHandler(nil) }
        }
        func urlSession(
            _ session: Session, dataTask: SessionTask, didReceive response: URLResponse,
            completionHandler: @escaping @Sendable (Session.ResponseDisposition) -> Void
        ) {
            completionHandler((response as? HTTPURLResponse)?.statusCode == 302 ? .allow : .cancel)
        }
        func urlSession(
            _ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge,
            completionHandler: @escaping @Sendable (Session.AuthChallengeDisposition, Credential?) -> Void
        ) {
            completionHandler(.useCredential, Credential(user: "ann", password: "pw", persistence: .none))
        }
    }

    @Test("Delegates may answer through completion handlers, as Apple's do")
    func completionHandlerDelegateForms() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/redirect", Routes.redirect(to: "/elsewhere"))
        origin.route("/private", Routes.basicAuth(realm: "r", user: "ann", password: "pw", then: ScriptedResponse(body: "ok")))
        let session = try Self.session(CompletionHandlerDelegate())
        // The redirect is refused (nil): the 302 is the response, and allowed.
        let (_, response) = try await session.data(for: URLRequest(url: origin.url("/redirect")), delegate: CompletionHandlerDelegate())
        #expect((response as? HTTPURLResponse)?.statusCode == 302)
        #expect(origin.requests.map(\.path) == ["/redirect"])
        // The challenge is answered; the 200 is then cancelled by the response handler.
        let delegate = CompletionHandlerDelegate()
        let second = try Self.session(delegate)
        second.dataTask(with: URLRequest(url: origin.url("/private"))).resume()
        var iterator = delegate.completions.makeAsyncIterator()
        #expect(await iterator.next() == "cancelled")
        #expect(origin.requests.last?.header("Authorization") != nil)
        second.finishTasksAndInvalidate()
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}

extension SessionTests {
    @Test("BecomeDownload turns a data task into a download task; no byte is lost and no data call follows")
    func becomeDownload() async throws {
        let origin = try await TestOrigin.start()
        let body = (0..<200_000).map { UInt8($0 % 251) }
        origin.route("/file", response: ScriptedResponse(parts: [.bytes(Array(body[..<70_000])), .pause(.milliseconds(20)), .bytes(Array(body[70_000...]))], framing: .chunked))
        let delegate = RecordingDelegate(.init(disposition: .becomeDownload))
        let session = try Self.session(delegate)
        let task = session.dataTask(with: URLRequest(url: origin.url("/file")))
        task.resume()
        await delegate.waitForCompletion()
        #expect(delegate.events == ["response 200", "became download", "write", "downloaded", "metrics 1", "complete"])
        #expect(delegate.downloaded == Data(body))
        #expect(delegate.data.isEmpty)
        #expect(task.kind == .download)
        #expect(task.progress.completedUnitCount == Int64(body.count))
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
