import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport
import Transport
@testable import URLLoading

/// A resumable upload in the engine, its transfers played by a script: the
/// announcing fields, the 104's resumption URL, and after a dropped
/// connection the HEAD for the server's offset and the PATCH of the rest.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct ResumableUploadEngineTests {
    static let body = Data((0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
    static let lost = TransferError.connection(.connectionLost, "the connection was reset")

    /// Plays a final head and a short body, then the transfer's end.
    static func respond(_ transfer: ScriptedExecutor.Transfer, _ status: Int, _ fields: [(String, String)] = [], body: String = "") async {
        transfer.head(status, fields + [("Content-Length", "\(body.utf8.count)")])
        if !body.isEmpty, !(await transfer.bodyTaken(body)) { Issue.record("the body was never taken") }
        transfer.finishUnlessCancelled()
    }

    @Test("A dropped upload asks its resumption URL how much arrived and sends only the rest; one response reaches the handler")
    func resumesFromTheServersOffset() async throws {
        let harness = EngineHarness()
        let (task, outcome) = harness.upload("/files", body: Self.body)
        let first = try #require(await harness.executor.transfer(0))
        #expect(first.request.method == "POST")
        #expect(first.field("Upload-Draft-Interop-Version") == "6" && first.field("Upload-Complete") == "?1")
        first.interim(104, [("Location", "/uploads/17")])
        first.sent(400, of: 1000)
        first.fail(Self.lost)

        let offset = try #require(await harness.executor.transfer(1))
        #expect(offset.request.method == "HEAD" && offset.request.url == "http://engine.invalid/uploads/17")
        #expect(offset.field("Upload-Draft-Interop-Version") == "6" && offset.field("Upload-Offset") == nil)
        if case .none = offset.request.body {} else { Issue.record("the HEAD carries a body") }
        await Self.respond(offset, 204, [("Upload-Offset", "300"), ("Cache-Control", "no-store")])

        let append = try #require(await harness.executor.transfer(2))
        #expect(append.request.method == "PATCH" && append.request.url == "http://engine.invalid/uploads/17")
        #expect(append.field("Upload-Offset") == "300" && append.field("Upload-Complete") == "?1")
        #expect(append.field("Content-Type") == "application/partial-upload")
        guard case .data(let rest) = append.request.body else {
            Issue.record("the PATCH's body is not the rest of the data")
            return
        }
        #expect(rest == Self.body.subdata(in: 300..<1000))
        append.sent(700, of: 700)
        await Self.respond(append, 201, body: "ok")
        #expect(await outcome.wait())
        #expect(outcome.error == nil && outcome.response?.statusCode == 201 && outcome.body == "ok")
        #expect(task.countOfBytesSent == 1000, "progress counts on from the server's offset")
        #expect(harness.executor.started.count == 3)
    }

    @Test("Without a 104, or with one on another origin, a dropped upload fails as any; resumable uploads off send no field")
    func noResumption() async throws {
        let harness = EngineHarness()
        let (_, plain) = harness.upload("/a", body: Self.body)
        let a = try #require(await harness.executor.transfer(0))
        a.fail(Self.lost)
        #expect(await plain.wait())
        #expect(plain.code == .networkConnectionLost)

        let (_, elsewhere) = harness.upload("/b", body: Self.body)
        let b = try #require(await harness.executor.transfer(1))
        b.interim(104, [("Location", "http://other.invalid/uploads/1")])
        b.fail(Self.lost)
        #expect(await elsewhere.wait())
        #expect(elsewhere.code == .networkConnectionLost && harness.executor.started.count == 2, "another origin's URL was asked")

        let off = EngineHarness { $0.resumableUploadVersion = nil }
        let (_, quiet) = off.upload("/c", body: Self.body)
        let c = try #require(await off.executor.transfer(0))
        #expect(c.field("Upload-Draft-Interop-Version") == nil && c.field("Upload-Complete") == nil)
        await Self.respond(c, 200)
        #expect(await quiet.wait())

        let three = EngineHarness { $0.resumableUploadVersion = 3 }
        let (_, old) = three.upload("/d", body: Self.body)
        let d = try #require(await three.executor.transfer(0))
        #expect(d.field("Upload-Draft-Interop-Version") == "3" && d.field("Upload-Incomplete") == "?0" && d.field("Upload-Complete") == nil)
        await Self.respond(d, 200)
        #expect(await old.wait())

        // A data task's body is not an upload task's: it announces nothing.
        let (_, posted) = harness.start("/e") {
            $0.httpMethod = "POST"
            $0.httpBody = Data("x".utf8)
        }
        let e = try #require(await harness.executor.transfer(2))
        #expect(e.request.method == "POST" && e.field("Upload-Draft-Interop-Version") == nil)
        await Self.respond(e, 200)
        #expect(await posted.wait())
    }

    @Test("The server lost the upload (404 to the HEAD): the whole body once more as a new upload; losing that one too fails")
    func restartsOnce() async throws {
        let harness = EngineHarness()
        let (_, outcome) = harness.upload("/files", body: Self.body)
        let first = try #require(await harness.executor.transfer(0))
        first.interim(104, [("Location", "/uploads/1")])
        first.fail(Self.lost)
        let offset = try #require(await harness.executor.transfer(1))
        await Self.respond(offset, 404)
        let again = try #require(await harness.executor.transfer(2))
        #expect(again.request.method == "POST" && again.request.url == "http://engine.invalid/files")
        guard case .data(let whole) = again.request.body else {
            Issue.record("the new upload's body is not the data")
            return
        }
        #expect(whole == Self.body)
        again.interim(104, [("Location", "/uploads/2")])
        again.fail(Self.lost)
        let second = try #require(await harness.executor.transfer(3))
        #expect(second.request.url == "http://engine.invalid/uploads/2")
        await Self.respond(second, 404)
        #expect(await outcome.wait())
        #expect(outcome.code == .networkConnectionLost && harness.executor.started.count == 4, "the body went a third time")
    }

    @Test("A hostile offset answer (none, not a number, beyond the body, going back) fails the task with badServerResponse")
    func hostileOffsets() async throws {
        for answer in [nil, "lots", "-5", "1001", "99999999999999999999"] {
            let harness = EngineHarness()
            let (_, outcome) = harness.upload("/files", body: Self.body)
            let first = try #require(await harness.executor.transfer(0))
            first.interim(104, [("Location", "/uploads/9")])
            first.fail(Self.lost)
            let offset = try #require(await harness.executor.transfer(1))
            await Self.respond(offset, 204, answer.map { [("Upload-Offset", $0)] } ?? [])
            #expect(await outcome.wait())
            #expect(outcome.code == .badServerResponse, "\(answer ?? "no field")")
            #expect(harness.executor.started.count == 2, "\(answer ?? "no field"): a PATCH went out")
        }
    }

    @Test("A server that answers every append with 409: one PATCH, then the task fails with badServerResponse; the body is on the wire at most twice")
    func conflictsEnd() async throws {
        let harness = EngineHarness()
        let (_, outcome) = harness.upload("/files", body: Self.body)
        let first = try #require(await harness.executor.transfer(0))
        first.interim(104, [("Location", "/uploads/4")])
        first.fail(Self.lost)
        var bodyBytes = Int64(Self.body.count)
        for index in 1...3 {
            let transfer = try #require(await harness.executor.transfer(index))
            if transfer.request.method == "HEAD" {
                await Self.respond(transfer, 204, [("Upload-Offset", "300")])
            } else {
                if case .data(let rest) = transfer.request.body { bodyBytes += Int64(rest.count) }
                await Self.respond(transfer, 409, [("Upload-Offset", "300")])
            }
        }
        #expect(await outcome.wait())
        #expect(outcome.code == .badServerResponse, "\(String(describing: outcome.error))")
        #expect(harness.executor.started.count == 4, "upload, HEAD, PATCH, HEAD: \(harness.executor.started.count) transfers")
        #expect(bodyBytes <= 2 * Int64(Self.body.count), "\(bodyBytes) body bytes for a \(Self.body.count)-byte upload")
    }
}
