import Foundation
import Testing
import TestSupport
import TransferDaemon
import URLLoading

/// `cachetool transfers` against a real app, transferd
/// and origin: what a person managing background transfers sees and does.
@Suite("cachetool transfers", .serialized, .timeLimit(.minutes(Sanitizer.minutes(3))))
struct TransferToolTests {
    typealias World = BackgroundSessionProcessTests.World

    static let cachetool = ChildProcess.productsDirectory.appendingPathComponent("cachetool")
    /// Secrets of the task's request, none of which may be printed.
    static let secrets = ["pa55word", "t0ps3cret", "h3ad3rs3cret", "c00kies3cret"]

    static func transfers(_ world: World, _ arguments: [String]) async throws -> ChildProcess.Result {
        try await ChildProcess.run(cachetool, ["transfers"] + arguments, environment: world.environment)
    }

    /// `list --json`'s rows.
    static func rows(_ world: World) async throws -> [[String: Any]] {
        let result = try await transfers(world, ["list", "--json"])
        #expect(result.status == 0, "\(result.standardError)")
        for secret in secrets { #expect(!result.standardOutput.contains(secret), "list --json printed a secret") }
        return (try? JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8))) as? [[String: Any]] ?? []
    }

    /// Runs `list --json` until a row satisfies `condition` (bounded: 45 s).
    static func listed(_ world: World, where condition: ([String: Any]) -> Bool) async throws -> [String: Any]? {
        let deadline = ContinuousClock.now + .seconds(45) * Sanitizer.timeScale
        while ContinuousClock.now < deadline {
            if let row = try await rows(world).first(where: condition) { return row }
        }
        return nil
    }

    @Test("list --json shows a running download with its bytes growing and no secret; show and the table neither; cancel ends it and the app hears cancelled; retry of a task not waiting says so")
    func listAndCancel() async throws {
        let origin = try await TestOrigin.start()
        let (first, second) = (OriginGate(), OriginGate())
        let slice = 256 << 10
        origin.route(
            "/secret",
            response: ScriptedResponse(parts: [
                .pattern(offset: 0, count: slice), .waitFor(first), .pattern(offset: slice, count: slice), .waitFor(second),
                .pattern(offset: 2 * slice, count: 2 * slice),
            ]))
        defer {
            first.open()
            second.open()
        }
        let world = World()
        let url = "http://agent:pa55word@127.0.0.1:\(origin.port)/secret?token=t0ps3cret&page=2"
        let app = try world.app([
            "tool", "--header", "Authorization: Bearer h3ad3rs3cret", "--header", "Cookie: sid=c00kies3cret", "download", url,
        ])
        #expect(await world.lines(of: app, until: "created").last == "created 1")

        func bytes(_ row: [String: Any]) -> Int { (row["bytes"] as? NSNumber)?.intValue ?? -1 }
        let before = try await Self.listed(world) { $0["state"] as? String == "running" && bytes($0) == slice }
        let seen = before == nil ? try await Self.rows(world) : []
        #expect(before != nil, "\(seen)\n\(world.log)")
        first.open()
        let after = try await Self.listed(world) { $0["state"] as? String == "running" && bytes($0) == 2 * slice }
        let seenAfter = after == nil ? try await Self.rows(world) : []
        #expect(after != nil, "the bytes grew: \(seenAfter)")
        if let after {
            #expect(after["session"] as? String == "tool" && (after["task"] as? NSNumber)?.intValue == 1)
            #expect((after["url"] as? String)?.hasPrefix("http://127.0.0.1:\(origin.port)/secret?") == true, "\(after)")
        }
        for arguments in [["list"], ["show", "tool", "1"], ["show", "tool", "1", "--json"]] {
            let shown = try await Self.transfers(world, arguments)
            #expect(shown.status == 0 && shown.standardOutput.contains("/secret"), "\(arguments): \(shown.standardOutput)\(shown.standardError)")
            for secret in Self.secrets { #expect(!shown.standardOutput.contains(secret), "\(arguments) printed a secret") }
        }

        let retry = try await Self.transfers(world, ["retry", "tool", "1"])
        #expect(retry.status == 3 && retry.standardError.contains("not waiting to retry"), "\(retry.standardError)")
        let cancel = try await Self.transfers(world, ["cancel", "tool", "1"])
        #expect(cancel.status == 0 && cancel.standardOutput.contains("cancelled"), "\(cancel.standardError)")
        let end = await world.lines(of: app, until: "complete")
        #expect(end.last?.hasPrefix("complete 1 cancelled") == true, "\(end)")
        _ = try await app.wait()
        let unknown = try await Self.transfers(world, ["cancel", "tool", "99"])
        #expect(unknown.status == 3 && unknown.standardError.contains("no task 99"), "\(unknown.standardError)")
        try await origin.shutdown()
    }

    @Test("Without a journal, list exits 3 and says where it looked; a task number out of range is a usage error")
    func noJournal() async throws {
        let world = World()
        let listed = try await Self.transfers(world, ["list"])
        #expect(listed.status == 3 && listed.standardError.contains("no transfer journal"), "\(listed.standardError)")
        let usage = try await Self.transfers(world, ["cancel", "tool", "99999999999"])
        #expect(usage.status == 2, "\(usage.standardError)")
    }
}
