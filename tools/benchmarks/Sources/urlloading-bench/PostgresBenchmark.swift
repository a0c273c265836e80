import CPostgresBench
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
@_spi(Tools) import URLLoading
import URLLoadingPostgres

/// `urlloading-bench cache-postgres <conninfo>`: our cache on
/// PostgreSQL against raw libpq doing the same statements on the same
/// tables, a hit against our SQLite disk tier, and a fleet of worker
/// processes asking for the same URLs (origin requests per distinct URL),
/// and how soon a store in one worker leaves another's memory tier.
enum PostgresBenchmark {
    static let storeCount = 3_000
    static let hitCount = 10_000
    static let rounds = 3
    static let fleetWorkers = 4
    static let fleetURLs = 50
    static let fleetConcurrency = 8

    static func createDatabase(_ conninfo: String, _ name: String) -> String {
        guard let admin = PQconnectdb(conninfo), PQstatus(admin) == CONNECTION_OK else { fail("cannot connect to \(conninfo)") }
        defer { PQfinish(admin) }
        PQclear(PQexec(admin, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
        guard let result = PQexec(admin, "CREATE DATABASE \(name)") else { fail("cannot create \(name)") }
        defer { PQclear(result) }
        if PQresultStatus(result) != PGRES_COMMAND_OK { fail("cannot create \(name): \(String(cString: PQresultErrorMessage(result)))") }
        return "\(conninfo) dbname=\(name)"
    }

    static func cache(_ url: String, memory: Int = 0) -> ResponseCache {
        do {
            return try ResponseCache(memoryCapacity: memory, diskCapacity: 1 << 34, database: PostgresDatabase(url: url))
        } catch {
            fail("our PostgreSQL cache: \(error)")
        }
    }

    static func run(conninfo: String) {
        print("urlloading-bench cache-postgres: microseconds per operation (best of \(rounds) in turns), then ratios\n")
        let oursURL = createDatabase(conninfo, "bench_ours"), rawURL = createDatabase(conninfo, "bench_raw")
        let ours = cache(oursURL)
        _ = cache(rawURL)  // our migrator makes the tables the raw reference writes
        let raw = RawPostgres(rawURL)
        let sqlite = CacheBenchmark.ours(scratchDirectory("pg-sqlite"))
        var oursStore = Double.infinity, rawStore = Double.infinity
        var oursHit = Double.infinity, rawHit = Double.infinity, sqliteHit = Double.infinity
        for round in 0..<rounds {
            let offset = round * storeCount
            oursStore = min(oursStore, microsecondsPerOperation(storeCount) { for i in offset..<(offset + storeCount) { CacheBenchmark.storeOurs(ours, i) } })
            rawStore = min(rawStore, microsecondsPerOperation(storeCount) { for i in offset..<(offset + storeCount) { raw.store(i) } })
            if round == 0 { for i in 0..<storeCount { CacheBenchmark.storeOurs(sqlite, i) } }
            let order = Fixture.lookups(hitCount, below: storeCount)
            var total = (0, 0, 0)
            oursHit = min(oursHit, microsecondsPerOperation(hitCount) { for i in order { total.0 += CacheBenchmark.lookupOurs(ours, i) } })
            rawHit = min(rawHit, microsecondsPerOperation(hitCount) { for i in order { total.1 += raw.lookup(i) } })
            sqliteHit = min(sqliteHit, microsecondsPerOperation(hitCount) { for i in order { total.2 += CacheBenchmark.lookupOurs(sqlite, i) } })
            if total.0 != hitCount * Fixture.body.count || total.1 != total.0 || total.2 != total.0 { fail("a hit missed: \(total)") }
        }
        print("figure      ours µs   raw-libpq µs   ours on sqlite µs")
        print("pg-store   \(formatted(oursStore).leftPadded(8))   \(formatted(rawStore).leftPadded(12))")
        print("pg-hit     \(formatted(oursHit).leftPadded(8))   \(formatted(rawHit).leftPadded(12))   \(formatted(sqliteHit).leftPadded(17))")

        print("\nlarge bodies (raw libpq, best of \(LargeBodyBenchmark.rounds)):")
        LargeBodyBenchmark.run(createDatabase(conninfo, "bench_bodies")).forEach { print("  \($0)") }
        let (requests, fleetTime) = fleet(conninfo: conninfo)
        print("fleet: \(fleetWorkers) workers × \(fleetConcurrency) concurrent requests for each of \(fleetURLs) URLs (origin answers after 20 ms): \(Int(fleetTime)) ms, \(requests) origin requests")
        let (medianMs, maxMs) = invalidation(conninfo: conninfo)
        print("invalidation: a store in one worker leaves another's memory tier after \(String(format: "%.2f", medianMs)) ms (median of 200), at most \(String(format: "%.2f", maxMs)) ms\n")
        print("bench cache pg-store: \(String(format: "%.2f", oursStore / rawStore))x raw-libpq")
        print("bench cache pg-hit: \(String(format: "%.2f", oursHit / rawHit))x raw-libpq")
        print("bench cache pg-hit: \(String(format: "%.2f", oursHit / sqliteHit))x sqlite")
        print("bench fleet coalesced: \(requests)/\(fleetURLs)")
        print("bench fleet invalidation: \(String(format: "%.2f", medianMs)) ms median, \(String(format: "%.2f", maxMs)) ms max")
    }

    // MARK: Fleet

    /// An origin answering every GET after 20 ms with a cacheable 24 KiB body, counting requests.
    final class Origin: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        static let requests = Atomic<Int>(0)
        static let body = Data(repeating: 0x61, count: 24 * 1024)

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            _ = Self.requests.add(1, ordering: .relaxed)
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .milliseconds(20)) {
                let context = loopBound.value
                var headers = HTTPHeaders([("Cache-Control", "max-age=600"), ("Content-Length", "\(Self.body.count)")])
                headers.add(name: "Content-Type", value: "application/octet-stream")
                context.write(NIOAny(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
                context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: Self.body)))), promise: nil)
                context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
            }
        }
    }

    static func fleet(conninfo: String) -> (requests: Int, milliseconds: Double) {
        let url = createDatabase(conninfo, "bench_fleet")
        _ = cache(url)  // the tables first: the workers race on keys, not on migrations
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let server = startHTTPServer(group: group, named: "the fleet's origin") { Origin() }
        defer { try? server.close().wait() }
        let base = "http://127.0.0.1:\(server.localAddress?.port ?? 0)"
        let start = now()
        let workers = (0..<fleetWorkers).map { _ in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
            process.arguments = ["fleet-child", url, base, "\(fleetURLs)", "\(fleetConcurrency)"]
            let output = Pipe()
            process.standardOutput = output
            do { try process.run() } catch { fail("a fleet worker did not start: \(error)") }
            return (process, output)
        }
        for (process, output) in workers {
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            if process.terminationStatus != 0 || !text.hasPrefix("ok") { fail("a fleet worker: \(text)") }
        }
        return (Origin.requests.load(ordering: .relaxed), Double(now() - start) / 1_000_000)
    }

    /// One worker: every URL `concurrency` times at once, each body checked.
    static func fleetChild(url: String, base: String, urls: Int, concurrency: Int) async -> String {
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = cache(url)
        configuration.httpMaximumConnectionsPerHost = 16
        let session = Session(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        let bad = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<urls {
                for _ in 0..<concurrency {
                    group.addTask {
                        guard let target = URL(string: "\(base)/fleet/\(index)"), let (data, _) = try? await session.data(from: target) else { return true }
                        return data != Origin.body
                    }
                }
            }
            var bad = 0
            for await failed in group where failed { bad += 1 }
            return bad
        }
        return bad == 0 ? "ok" : "bad \(bad)"
    }

    /// Two caches on one database, as two workers: the time from a store
    /// in the first to the key leaving the second's memory tier.
    ///
    /// The first store of a key sends a notice too, and it can reach the
    /// second after the second has read the key into its memory tier,
    /// emptying it before the timed store. So each round first waits for
    /// that notice: the first stores a barrier key after the key, the
    /// second holds the barrier in memory, and notices arrive in the order
    /// of their commits, so once the barrier has left the second's memory
    /// tier the key's notice has been handled too. (The second stores the
    /// barrier first itself: a cache ignores its own notices, so no notice
    /// of it is on the way when the rounds begin; each round ends with
    /// every notice sent so far handled.)
    static func invalidation(conninfo: String) -> (median: Double, max: Double) {
        let url = createDatabase(conninfo, "bench_invalidation")
        let first = cache(url, memory: 1 << 20), second = cache(url, memory: 1 << 20)
        let barrier = 1_000_000
        func waitForEmptyMemory(_ what: String, since start: UInt64) {
            let deadline = start + 5_000_000_000
            while second.currentMemoryUsage > 0 {
                if now() > deadline { fail("the second worker's memory tier kept \(what) for 5 s") }
                sched_yield()
            }
        }
        CacheBenchmark.storeOurs(second, barrier)
        var times: [Double] = []
        for index in 0..<200 {
            guard CacheBenchmark.lookupOurs(second, barrier) > 0, second.currentMemoryUsage > 0 else { fail("the second worker missed the barrier") }
            CacheBenchmark.storeOurs(first, index)
            CacheBenchmark.storeOurs(first, barrier)
            waitForEmptyMemory("the barrier", since: now())
            guard CacheBenchmark.lookupOurs(second, index) > 0, second.currentMemoryUsage > 0 else { fail("the second worker missed") }
            let start = now()
            CacheBenchmark.storeOurs(first, index)
            waitForEmptyMemory("a stale key", since: start)
            times.append(Double(now() - start) / 1_000_000)
        }
        return (median(times), times.max() ?? 0)
    }
}
