import Foundation
import Testing
import TestSupport
import URLLoading

/// transferd runs a plain GET download on the transport itself and hands
/// what the session decides (a redirect, a challenge) to a task of the
/// session: both ways end the same for the app.
extension BackgroundSessionProcessTests {
    @Test("A background download that is redirected finishes with the target's body; an empty body finishes with an empty file")
    func redirectedAndEmpty() async throws {
        let origin = try await TestOrigin.start()
        let body = String(repeating: "moved here. ", count: 400)
        origin.route("/target", response: ScriptedResponse(body: body))
        origin.route("/moved", response: ScriptedResponse(status: 302, headers: [HeaderField("Location", "/target")], body: "see /target"))
        origin.route("/empty", response: ScriptedResponse(body: ""))
        let world = World()
        let digest = SHA256.hash(Array(body.utf8)).map { String(format: "%02x", $0) }.joined()
        let moved = try await world.run(["direct", "download", origin.url("/moved").absoluteString])
        #expect(moved.contains("finished 1 \(body.utf8.count) \(digest)"), "\(moved) \(world.log)")
        #expect(moved.contains("complete 1 nil status 200"), "\(moved)")
        #expect(origin.requests(to: "/target").count == 1)
        let empty = try await world.run(["direct", "download", origin.url("/empty").absoluteString])
        let emptyDigest = SHA256.hash([UInt8]()).map { String(format: "%02x", $0) }.joined()
        #expect(empty.contains("finished 2 0 \(emptyDigest)"), "\(empty) \(world.log)")
        #expect(empty.contains("complete 2 nil status 200"), "\(empty)")
        try await origin.shutdown()
    }
}
