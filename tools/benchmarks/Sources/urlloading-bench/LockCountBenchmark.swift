import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import URLLoading

/// How many times a task takes its lock per GET (`tools/profile-get
/// --locks`): a default-configuration session (its stores where XDG_*_HOME
/// say), one GET at a time with async `data(from:)`. A miss asks for a URL
/// the cache has not seen (a new query each time: the origin ignores it);
/// a memory hit asks again for one answered before, fresh for an hour.
/// With `URLLOADING_LOCK_SITES` set, the call sites taken at least once
/// per GET come first. Needs a build with `-DURLLOADING_COUNT_LOCKS`;
/// others print why not.
enum LockCountBenchmark {
    static func child(url: String, count: Int) async -> String {
        #if URLLOADING_COUNT_LOCKS
        guard let base = URL(string: url) else { return "bad URL" }
        let session = Session(configuration: .default)
        func get(_ target: URL) async -> Bool {
            guard let (_, response) = try? await session.data(from: target) else { return false }
            return (response as? HTTPURLResponse)?.statusCode == 200
        }
        func perGet(_ name: String, _ targets: (Int) -> URL) async -> String {
            let before = TaskLockCount.value
            TaskLockCount.resetSites()
            for index in 0..<count {
                guard await get(targets(index)) else { return "a GET failed" }
            }
            let average = Double(TaskLockCount.value - before) / Double(count)
            if ProcessInfo.processInfo.environment["URLLOADING_LOCK_SITES"] != nil {
                // Where they are taken: sites taken at least once per GET.
                let sites = TaskLockCount.sites.filter { $0.count >= count }
                print("\(name), by call site (per GET):")
                print(sites.map { String(format: "  %5.1f  %@", Double($0.count) / Double(count), $0.site) }.joined(separator: "\n"))
            }
            return String(format: "%.1f", average)
        }
        // Warm: the connection, the stores' files, the hit's entry in memory.
        for index in 0..<10 { _ = await get(base.appending(queryItems: [URLQueryItem(name: "warm", value: "\(index)")])) }
        guard await get(base) else { return "the origin did not answer" }
        let miss = await perGet("cache miss") { base.appending(queryItems: [URLQueryItem(name: "miss", value: "\($0)")]) }
        let hit = await perGet("memory hit") { _ in base }
        return "cache miss: \(miss) lock acquisitions per GET\nmemory hit: \(hit) lock acquisitions per GET"
        #else
        return "this build does not count locks: build with -Xswiftc -DURLLOADING_COUNT_LOCKS"
        #endif
    }
}
