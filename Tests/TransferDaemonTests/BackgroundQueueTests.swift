import Foundation
import Testing
import TestSupport
import TransferDaemon

/// transferd hands its transport more downloads than a host has
/// connections: those past the six wait in the transport's queue and
/// start as a connection frees. Real processes, as the suite's other tests.
extension BackgroundSessionProcessTests {
    @Test(
        "A download queued behind a host's six busy connections is handed to the transport, waits there past its request timeout without failing, and completes once a connection frees"
    )
    func queuedPastTheRequestTimeout() async throws {
        let origin = try await TestOrigin.start()
        let gate = OriginGate()
        origin.route("/held", Self.slowBody(gate: gate))
        origin.route("/small", response: ScriptedResponse(body: "hello"))
        let world = World()
        // Six downloads of another app hold the host's six connections.
        let holders = try world.app(["holders", "--count", "6", "download", origin.url("/held").absoluteString])
        #expect(await eventually { origin.requests(to: "/held").count == 6 }, "\(origin.requests.count) requests\n\(world.log)")

        // A seventh, with a request timeout of one second, is handed to the
        // transport at once and waits there for a connection.
        let waiting = try world.app(["waiting", "--timeout", "1", "download", origin.url("/small").absoluteString])
        #expect(
            await eventually { world.records().contains { $0.session == "waiting" && $0.phaseName == "running" } },
            "\(world.records().map { "\($0.session) \($0.phaseName)" })\n\(world.log)")
        // Three of its timeouts pass (the time is what is tested): it neither
        // failed nor was tried again, and nothing of it reached the origin.
        try await Task.sleep(for: .seconds(3))
        let queued = world.records().filter { $0.session == "waiting" }
        #expect(queued.map(\.phaseName) == ["running"], "\(queued.map(\.phaseName))\n\(world.log)")
        #expect(queued.map(\.machine.attempts) == [1], "\(queued.map(\.machine.attempts))")
        #expect(origin.requests(to: "/small").isEmpty)

        gate.open()
        let lines = await world.lines(of: waiting, until: "complete")
        #expect(lines.contains("complete 1 nil status 200"), "\(lines)\n\(world.log)")
        let held = await world.lines(of: holders, until: "bye")
        #expect(held.filter { $0.hasSuffix(" nil status 200") }.count == 6, "\(held)")
        _ = try await waiting.wait()
        _ = try await holders.wait()
        try await origin.shutdown()
    }
}
