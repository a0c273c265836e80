import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// The manager's delegate-method closures, notifications and event
/// monitors, against the loopback origin.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2)))) struct ManagerOverridesTests {
    static let json = [HeaderField("Content-Type", "application/json")]

    /// Records what a monitor hears, in order.
    final class Recorder: ManagerEventMonitor {
        let seen = Lock<[String]>([])
        func session(_ session: Session, taskDidResume task: SessionTask) { seen.withLock { $0.append("resume \(task.taskIdentifier)") } }
        func session(_ session: Session, taskDidSuspend task: SessionTask) { seen.withLock { $0.append("suspend \(task.taskIdentifier)") } }
        func session(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
            seen.withLock { $0.append("complete \(task.taskIdentifier) \(error == nil ? "ok" : "error")") }
        }
        func session(_ session: Session, didBecomeInvalidWithError error: (any Error)?) { seen.withLock { $0.append("invalid") } }
    }

    /// Runs a JSON GET and returns its result.
    static func get(_ manager: HTTPSessionManager, _ path: String) async -> Result<JSONValue, ManagerError> {
        await withCheckedContinuation { continuation in
            manager.get(path, success: { _, value in continuation.resume(returning: .success(value)) }, failure: { _, error in continuation.resume(returning: .failure(error)) })
        }
    }

    @Test("Redirect, challenge, response and willCacheResponse closures take over their delegate methods; without them the defaults hold")
    func overrides() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/api/moved", response: ScriptedResponse(status: 302, headers: [HeaderField("Location", "/api/target")], body: ""))
        origin.route("/api/target") { request in ScriptedResponse(headers: Self.json + [HeaderField("Cache-Control", "max-age=600")], body: #"{"marked":"\#(request.header("X-Marked") ?? "no")"}"#) }
        let expected = "Basic " + Data("ann:pw".utf8).base64EncodedString()
        origin.route("/api/secret") { request in
            request.header("Authorization") == expected
                ? ScriptedResponse(headers: Self.json, body: #"{"in":true}"#)
                : ScriptedResponse(status: 401, headers: [HeaderField("WWW-Authenticate", #"Basic realm="r""#)], body: "")
        }
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = ResponseCache(memoryCapacity: 1 << 20)
        let manager = HTTPSessionManager(baseURL: origin.url("/api"), configuration: configuration)
        defer { manager.invalidateSession(cancelingTasks: true) }
        // Defaults: the redirect is followed, the challenge unanswered (its 401 fails validation), the response cached.
        #expect(try await Self.get(manager, "moved").get()["marked"] == .string("no"))
        #expect(try await Self.get(manager, "target").get()["marked"] == .string("no"))
        #expect(configuration.urlCache?.cachedResponse(for: URLRequest(url: origin.url("/api/target"))) != nil)
        if case .failure(let error) = await Self.get(manager, "secret") { #expect(error.kind == .unacceptableStatusCode(401)) } else { Issue.record("the 401 passed") }
        // Closures: a redirect changed, a challenge answered, nothing cached, a response cancelled.
        manager.setTaskWillPerformHTTPRedirection { _, _, _, request in
            var marked = request
            marked.setValue("yes", forHTTPHeaderField: "X-Marked")
            return marked
        }
        manager.setTaskDidReceiveChallenge { _, _, challenge in
            challenge.previousFailureCount == 0 ? (.useCredential, Credential(user: "ann", password: "pw", persistence: .none)) : (.cancelAuthenticationChallenge, nil)
        }
        let asked = Lock(0)
        manager.setDataTaskWillCacheResponse { _, _, _ in
            asked.withLock { $0 += 1 }
            return nil
        }
        configuration.urlCache?.removeAllCachedResponses()
        #expect(try await Self.get(manager, "moved").get()["marked"] == .string("yes"))
        #expect(try await Self.get(manager, "target").get()["marked"] == .string("no"))
        #expect(asked.withLock { $0 } == 2 && configuration.urlCache?.cachedResponse(for: URLRequest(url: origin.url("/api/target"))) == nil)
        #expect(try await Self.get(manager, "secret").get()["in"] == .bool(true))
        manager.setDataTaskDidReceiveResponse { _, _, _ in .cancel }
        if case .failure(let error) = await Self.get(manager, "secret") {
            #expect(error.kind == .transport && (error.underlying as? URLError)?.code == .cancelled)
        } else {
            Issue.record("a cancelled response succeeded")
        }
        try await origin.shutdown()
    }

    @Test("Notifications and monitors: each task resumed, suspended by its Progress, resumed and completed, then the session invalid, in that order")
    func events() async throws {
        let origin = try await TestOrigin.start()
        let gate = OriginGate()
        defer { gate.open() }
        origin.route("/api/slow", response: ScriptedResponse(headers: Self.json, parts: [.bytes(Array("[1".utf8)), .waitFor(gate), .bytes(Array("]".utf8))], framing: .declaredLength(3)))
        let recorder = Recorder()
        // The response waits at the gate until the test opens it.
        let configuration = SessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = TestTimeouts.request
        let manager = HTTPSessionManager(baseURL: origin.url("/api"), configuration: configuration, monitors: [recorder])
        let posted = Lock<[String]>([])
        // Other suites' managers post too: only this manager's tasks count.
        let ours = Lock<Set<ObjectIdentifier>>([])
        let center = NotificationCenter.default
        var observers: [any NSObjectProtocol] = []
        for (name, label) in [(Notification.Name.managerTaskDidResume, "resume"), (.managerTaskDidSuspend, "suspend"), (.managerTaskDidComplete, "complete")] {
            observers.append(
                center.addObserver(forName: name, object: nil, queue: nil) { note in
                    guard let task = note.object as? SessionTask else { return }
                    if manager.session.allTasks.contains(where: { $0 === task }) { ours.withLock { _ = $0.insert(ObjectIdentifier(task)) } }
                    guard ours.withLock({ $0.contains(ObjectIdentifier(task)) }) else { return }
                    posted.withLock { $0.append("\(label) \(task.taskIdentifier)") }
                })
        }
        observers.append(center.addObserver(forName: .managerSessionDidInvalidate, object: manager.session, queue: nil) { _ in posted.withLock { $0.append("invalid") } })
        defer { for observer in observers { center.removeObserver(observer) } }
        let started = CompletionLatch()
        let done = CompletionLatch()
        let invalid = CompletionLatch()
        manager.setSessionDidBecomeInvalid { _, _ in invalid.open() }
        let completed = Lock(0)
        manager.setTaskDidComplete { _, _, _ in completed.withLock { $0 += 1 } }
        let made = manager.dataTask(
            .get, "slow", serializer: DataResponseSerializer(), downloadProgress: { _ in started.open() }, success: { _, _ in done.open() },
            failure: { _, error in
                Issue.record("\(error)"); done.open()
            })
        let task = try #require(made)
        await started.wait()
        let progress = try #require(manager.downloadProgress(for: task))
        progress.pause()
        #expect(await eventually { task.state == .suspended && recorder.seen.withLock { $0.count } == 2 })
        progress.resume()
        gate.open()
        await done.wait()
        manager.invalidateSession(cancelingTasks: false)
        await invalid.wait()
        let id = task.taskIdentifier
        let expected = ["resume \(id)", "suspend \(id)", "resume \(id)", "complete \(id) ok", "invalid"]
        #expect(recorder.seen.withLock { $0 } == expected)
        #expect(await eventually { posted.withLock { $0.last } == "invalid" })
        #expect(posted.withLock { $0 } == ["resume \(id)", "suspend \(id)", "resume \(id)", "complete \(id)", "invalid"])
        #expect(completed.withLock { $0 } == 1)
        try await origin.shutdown()
    }
}
