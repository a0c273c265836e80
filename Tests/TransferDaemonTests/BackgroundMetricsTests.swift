import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
import TestSupport

/// A background session's gauge of the tasks transferd holds for it, in the
/// app's swift-metrics backend (swift-metrics' test backend in the helper app).
extension BackgroundSessionProcessTests {
    @Test("The gauge of transferd's unfinished tasks: 1 from the task's creation, 0 once it finished; an adopted task counts until its end")
    func queueGauge() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/small", response: ScriptedResponse(body: "hello"))
        let gate = OriginGate()
        defer { gate.open() }
        origin.route("/big", Self.slowBody(gate: gate))
        let world = World()
        let lines = try await world.run(["queueGauge", "download", origin.url("/small").absoluteString, "--metrics"])
        #expect(lines.contains("complete 1 nil status 200"), "\(lines)")
        #expect(lines.contains("queue 1 0"), "\(lines)")

        // A task the next app adopts from transferd counts from the attach.
        let app = try world.app(["queueGauge", "download", origin.url("/big").absoluteString])
        _ = await world.lines(of: app, until: "write")
        app.kill(SIGKILL)
        _ = try await app.wait()
        let adopted = try await world.run(["queueGauge", "cancel-all", "--metrics"])
        #expect(adopted.contains("listed 2:running"), "\(adopted)")
        #expect(adopted.contains("queue 1 0"), "\(adopted)")
        gate.open()
        try await origin.shutdown()
    }
}
