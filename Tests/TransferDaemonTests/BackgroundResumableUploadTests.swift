import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
import TestSupport

/// A background upload outlives transferd's death without sending its body
/// again: the journal keeps the resumption URL the server named, and the
/// restarted transferd asks it for the offset.
extension BackgroundSessionProcessTests {
    @Test("transferd is killed mid-upload after the server named a resumption URL: restarted, it asks for the offset and sends only the rest")
    func uploadResumesAfterTransferdDies() async throws {
        let size = 8 << 20
        // The server stops reading the first connection at a third: the upload waits there for the kill.
        let server = try await TestResumableUploadServer.start(holdAfter: size / 3)
        let world = World()
        let body = Data(TestOrigin.pattern(offset: 3, count: size))
        let file = world.directory.url.appendingPathComponent("body")
        try body.write(to: file)
        let app = try world.app(["resumableUpload", "upload", "\(server.origin)/files/bg", file.path])
        _ = await world.lines(of: app, until: "created")
        #expect(
            await eventually { world.records().first?.uploadResume != nil && server.heldBodyBytes != nil },
            "no resume data in the journal, or the server never held the upload\n\(world.log)")
        let held = try #require(server.heldBodyBytes)
        #expect(await eventually { server.received("/files/bg") == held }, "the server never processed what it read")
        let killed = try #require(world.transferdPID)
        // The app is stopped so that nothing restarts transferd before it is gone.
        app.kill(SIGSTOP)
        kill(killed, SIGKILL)
        #expect(await eventually { Self.isGone(killed) })
        app.kill(SIGCONT)
        let seen = await world.lines(of: app, until: "bye")
        #expect(seen.contains("complete 1 nil status 201"), "\(seen)\n\(world.log)")
        #expect(server.upload("/files/bg") == body, "the server's copy differs from the body")
        let requests = server.requests
        #expect(requests.count == 3 && requests.first == "PUT /files/bg", "\(requests)\n\(world.log)")
        #expect(requests.dropFirst().first?.hasPrefix("HEAD /resumable_upload/") == true, "\(requests)")
        #expect(requests.last?.hasPrefix("PATCH /resumable_upload/") == true, "\(requests)")
        #expect(Double(server.bodyBytes) <= Double(size) * 1.05, "\(server.bodyBytes) body bytes for a \(size)-byte file")
        #expect(world.log.contains("the upload goes on at its resumption URL"), "\(world.log)")
        try await server.shutdown()
    }

    @Test("A background upload announces resumable uploads as its app's configuration says: the default version, or nothing when it is off")
    func uploadAnnouncesAsConfigured() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/up", response: ScriptedResponse(status: 201, body: "ok"))
        let world = World()
        let file = world.directory.url.appendingPathComponent("body")
        try Data("hello".utf8).write(to: file)
        let on = try await world.run(["announcing", "upload", origin.url("/up").absoluteString, file.path])
        let off = try await world.run(["quiet", "--no-resumable-upload", "upload", origin.url("/up").absoluteString, file.path])
        #expect(on.contains("complete 1 nil status 201") && off.contains("complete 1 nil status 201"), "\(on) \(off)\n\(world.log)")
        let requests = origin.requests(to: "/up")
        #expect(requests.count == 2)
        #expect(requests.first?.header("Upload-Draft-Interop-Version") == "6" && requests.first?.header("Upload-Complete") == "?1")
        #expect(requests.last?.header("Upload-Draft-Interop-Version") == nil, "transferd announced what the app turned off")
        try await origin.shutdown()
    }
}
