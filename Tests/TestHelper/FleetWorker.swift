import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import URLLoading
import TestSupport
import URLLoadingPostgres

// urlloading-test-helper fleet-worker <postgres-url> <base-url> <urls> <concurrency>
//     One worker of a fleet: a session whose cache's persistent
//     tier is the PostgreSQL database, fetching <base-url>/fleet/<i> for i
//     below <urls>, <concurrency> requests for each at once, all started
//     together. Each body must be FleetBody.expected(i). Prints "ok
//     <requests> <bytes>", or "bad <what>" and exits 1.
func runFleetWorker(_ arguments: [String]) async -> Never {
    guard arguments.count == 4, let base = URL(string: arguments[1]), let urls = Int(arguments[2]), let concurrency = Int(arguments[3]) else {
        fail("fleet-worker <postgres-url> <base-url> <urls> <concurrency>")
    }
    let cache: ResponseCache
    do {
        cache = try ResponseCache(memoryCapacity: 0, diskCapacity: 256 << 20, database: PostgresDatabase(url: arguments[0]))
    } catch {
        print("bad cache: \(error)")
        exit(1)
    }
    let configuration = SessionConfiguration.ephemeral
    configuration.urlCache = cache
    configuration.httpMaximumConnectionsPerHost = 16
    let session = Session(configuration: configuration)
    let outcomes = await withTaskGroup(of: String?.self) { group in
        for index in 0..<urls {
            for _ in 0..<concurrency {
                group.addTask {
                    do {
                        let (data, response) = try await session.data(from: base.appendingPathComponent("fleet/\(index)"))
                        guard (response as? HTTPURLResponse)?.statusCode == 200 else { return "status of \(index)" }
                        return data == FleetBody.expected(index) ? nil : "body of \(index): \(data.count) bytes"
                    } catch {
                        return "fetch of \(index): \(error)"
                    }
                }
            }
        }
        var problems: [String] = []
        for await outcome in group { if let outcome { problems.append(outcome) } }
        return problems
    }
    session.finishTasksAndInvalidate()
    if let problem = outcomes.first {
        print("bad \(outcomes.count) problems, first: \(problem)")
        exit(1)
    }
    print("ok \(urls * concurrency) \((0..<urls).map { FleetBody.expected($0).count }.reduce(0, +) * concurrency)")
    exit(0)
}
