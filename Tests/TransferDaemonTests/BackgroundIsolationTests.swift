import Foundation
import Testing
import TestSupport
import URLLoading

/// transferd runs the transfers of every app of its user: what one task's
/// response leaves behind must never go out with another's request. The
/// app decides a request's cookies (from its own store, or none when its
/// configuration says so); transferd adds none of its own.
extension BackgroundSessionProcessTests {
    @Test("A cookie one background session's download was sent is not sent with another session's request, nor again with the first's once it asks for none")
    func cookiesStayWithTheApp() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/set", response: ScriptedResponse(headers: [HeaderField("Set-Cookie", "sid=fromA; Path=/")], body: "set"))
        origin.route("/other", response: ScriptedResponse(body: "other"))
        origin.route("/again", response: ScriptedResponse(body: "again"))
        let world = World()
        let first = try await world.run(["isolationA", "download", origin.url("/set").absoluteString])
        #expect(first.contains("complete 1 nil status 200"), "\(first) \(world.log)")
        let second = try await world.run(["isolationB", "--no-cookies", "download", origin.url("/other").absoluteString])
        #expect(second.contains("complete 1 nil status 200"), "\(second) \(world.log)")
        let third = try await world.run(["isolationA", "--no-cookies", "download", origin.url("/again").absoluteString])
        #expect(third.contains("complete 2 nil status 200"), "\(third) \(world.log)")
        #expect(origin.requests(to: "/other").count == 1)
        #expect(origin.requests(to: "/other").allSatisfy { $0.header("Cookie") == nil }, "another session's request carried the first's cookie")
        #expect(origin.requests(to: "/again").count == 1)
        #expect(origin.requests(to: "/again").allSatisfy { $0.header("Cookie") == nil }, "a request that asks for no cookies carried one")
        try await origin.shutdown()
    }
}
