import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
import TestSupport
import URLLoading

/// One transferd per user, by a lock on a file. A transferd that was just
/// killed can hold that lock a moment after it looks dead (its first
/// thread a zombie while another finishes a write), with nothing listening:
/// the one an app starts then waits for the lock instead of leaving at once.
extension BackgroundSessionProcessTests {
    @Test("transferd started while the instance lock is held and nothing listens waits for the lock, then serves the app that started it")
    func waitsForTheInstanceLock() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/small", response: ScriptedResponse(body: "served after the lock"))
        let world = World()
        let paths = world.paths
        try paths.prepareRuntime()
        // This test is the dying transferd: it holds the lock and does not listen.
        let lock = open(paths.lockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        #expect(lock >= 0)
        defer { if lock >= 0 { close(lock) } }
        #expect(flock(lock, LOCK_EX | LOCK_NB) == 0)
        let app = try world.app(["lockHeld", "download", origin.url("/small").absoluteString])
        #expect(await eventually { world.log.contains("the instance lock is held") }, "\(world.log)")
        #expect(flock(lock, LOCK_UN) == 0)
        let seen = await world.lines(of: app, until: "bye")
        #expect(seen.contains("complete 1 nil status 200"), "\(seen)\n\(world.log)")
        _ = try await app.wait()
        try await origin.shutdown()
    }
}
