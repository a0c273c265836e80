import Testing
import TestSupport

/// A background task's span, in the app that made it.
extension BackgroundSessionProcessTests {
    @Test("A background download has its span in the app, from resume() to its end, and transferd's request carries its traceparent")
    func backgroundSpan() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/small", response: ScriptedResponse(body: "hello"))
        let world = World()
        let lines = try await world.run(["traced", "download", origin.url("/small").absoluteString, "--trace"])
        #expect(lines.contains("complete 1 nil status 200"), "\(lines)")
        let spans = lines.filter { $0.hasPrefix("span ") }
        #expect(spans.count == 1, "\(lines)")
        let parts = spans.first?.split(separator: " ").map(String.init) ?? []
        #expect(parts.count == 4 && parts[1] == "GET" && parts[2] == "int64(200)", "\(spans)")
        #expect(origin.requests(to: "/small").map { $0.headerValues("traceparent") } == [[parts.last ?? "?"]])
        try await origin.shutdown()
    }
}
