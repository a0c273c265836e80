import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@_spi(Tools) @testable import URLLoading
import Postgres
@testable import URLLoadingPostgres

/// One origin fetch per key across a fleet: worker processes
/// whose caches share a PostgreSQL database, each asking for the same URLs
/// many times at once.
@Suite(.serialized, .timeLimit(.minutes(Sanitizer.minutes(3))))
struct FleetCoalescingTests {
    /// An origin serving `/fleet/<i>` slowly (so that requests overlap), cacheable.
    static func origin() async throws -> TestOrigin {
        let origin = try await TestOrigin.start()
        for index in 0..<50 {
            var response = ScriptedResponse(
                headers: [HeaderField("Cache-Control", "max-age=600"), HeaderField("Content-Type", "application/octet-stream")],
                body: Array(FleetBody.expected(index)))
            response.delayBeforeHead = .milliseconds(50)
            origin.route("/fleet/\(index)", response: response)
        }
        return origin
    }

    @Test("4 worker processes × 8 concurrent requests for each of 50 URLs: the origin sees exactly 50 requests, one per URL; every body arrives whole")
    func fourWorkers() async throws {
        let database = try TestPostgres.database()
        defer { database.drop() }
        let origin = try await Self.origin()
        defer { Task { try? await origin.shutdown() } }
        // The schema first, so that the workers race on keys, not on migrations.
        _ = try ResponseCache(memoryCapacity: 0, diskCapacity: 1 << 20, database: PostgresDatabase(url: database.url))
        let results = try await withThrowingTaskGroup(of: ChildProcess.Result.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    try await ChildProcess.run(ChildProcess.helper, ["fleet-worker", database.url, origin.baseURL.absoluteString, "50", "8"])
                }
            }
            var results: [ChildProcess.Result] = []
            for try await result in group { results.append(result) }
            return results
        }
        for result in results {
            #expect(result.standardOutput == "ok 400 \(400 * 24 * 1024)\n", "\(result.standardOutput)\(result.standardError.suffix(2000))")
        }
        let paths = origin.requests.map(\.path)
        #expect(paths.count == 50, "the origin saw \(paths.count) requests")
        #expect(Set(paths) == Set((0..<50).map { "/fleet/\($0)" }), "one per URL: \(paths.sorted())")
    }

    @Test("A worker holding a key dies: the waiting worker's task goes on with its own fetch, and gets the body")
    func holderDies() async throws {
        let database = try TestPostgres.database()
        defer { database.drop() }
        let origin = try await Self.origin()
        defer { Task { try? await origin.shutdown() } }
        let cache = try ResponseCache(memoryCapacity: 0, diskCapacity: 1 << 24, database: PostgresDatabase(url: database.url))
        let url = origin.baseURL.appendingPathComponent("fleet/7")
        let key = try #require(CachePolicy.primaryKey(url))
        // "Another worker" holds the key's lock on a connection of its own.
        var holder: PostgresConnection? = try PostgresConnection(database.url)
        try holder?.run("SELECT pg_advisory_lock($1)", [.int(PostgresFleetLocks.lockKey(key))])
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = cache
        let session = Session(configuration: configuration)
        defer { session.invalidateAndCancel() }
        async let fetched = session.data(from: url)
        // The task waits in the server for the lock (seen in pg_locks), and not at the origin.
        let watcher = try PostgresConnection(database.url)
        let waiting = await eventually {
            (try? watcher.scalarInt("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")) == 1
        }
        #expect(waiting, "the task waits for the key's lock")
        #expect(origin.requests.isEmpty)
        holder = nil  // the holder's connection closes, as when its process dies
        let (data, response) = try await fetched
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(data == FleetBody.expected(7))
        #expect(origin.requests.map(\.path) == ["/fleet/7"])
        _ = holder
    }

    @Test("Waiters let go of the key when they get it: after a fetch whose response is not stored, they all go to the origin together, not one after another")
    func waitersDoNotHoldTheKey() async throws {
        let database = try TestPostgres.database()
        defer { database.drop() }
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        let gate = OriginGate()
        defer { gate.open() }
        let body = Array(FleetBody.expected(0))
        // Not cacheable, and held at the origin until the test opens the gate.
        origin.route("/fleet/0", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "no-store")], parts: [.waitFor(gate), .bytes(body)]))
        let url = origin.baseURL.appendingPathComponent("fleet/0")
        let key = try #require(CachePolicy.primaryKey(url))
        // "Another worker" fetches the key: it holds its lock.
        let holder = try PostgresConnection(database.url)
        try holder.run("SELECT pg_advisory_lock($1)", [.int(PostgresFleetLocks.lockKey(key))])
        // Three workers (a cache and a session each, so three locks are waited for) ask for it.
        var sessions: [Session] = []
        for _ in 0..<3 {
            let configuration = SessionConfiguration.ephemeral
            // The responses wait at the gate until the test opens it.
            configuration.timeoutIntervalForRequest = TestTimeouts.request
            // A wait bound longer than the test's: only letting go of the key lets the others on.
            let storage = try PostgresCacheStorage(database: PostgresDatabase(url: database.url), capacity: 1 << 24, fleetWaitBound: 600)
            configuration.urlCache = ResponseCache(memoryCapacity: 0, storage: storage)
            sessions.append(Session(configuration: configuration))
        }
        defer { sessions.forEach { $0.invalidateAndCancel() } }
        let fetches = sessions.map { session in Task { try await session.data(from: url) } }
        let watcher = try PostgresConnection(database.url)
        let waiting = await eventually { (try? watcher.scalarInt("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")) == 3 }
        #expect(waiting, "three workers wait for the key")
        // The holder's response was not stored: it lets the key go.
        try holder.run("SELECT pg_advisory_unlock($1)", [.int(PostgresFleetLocks.lockKey(key))])
        // A waiter that kept the key while fetching would hold the others until its response
        // ended (it cannot: the origin holds it): all three must reach the origin first.
        let together = await eventually { origin.requests.count == 3 }
        #expect(together, "the origin saw \(origin.requests.count) of 3 requests while their responses were held")
        gate.open()
        for fetch in fetches {
            let (data, _) = try await fetch.value
            #expect(data == Data(body))
        }
    }
}
