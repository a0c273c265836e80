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
/// Needs a build with `-DURLLOADING_COUNT_LOCKS`; others print why not.
enum LockCountBenchmark {
    static func child(url: String, count: Int) async -> String {
        #if URLLOADING_COUNT_LOCKS
        guard let base = URL(string: url) else { return "bad URL" }
        let session = Session(configuration: .default)
        func get(_ target: URL) async -> Bool {
            guard let (_, response) = try? await session.data(from: target) else { return false }
            return (response as? HTTPURLResponse)?.statusCode == 200
        }
        func perGet(_ targets: (Int) -> URL) async -> String {
            let before = TaskLockCount.value
            for index in 0..<count {
                guard await get(targets(index)) else { return "a GET failed" }
            }
            return String(format: "%.1f", Double(TaskLockCount.value - before) / Double(count))
        }
        // Warm: the connection, the stores' files, the hit's entry in memory.
        for index in 0..<10 { _ = await get(base.appending(queryItems: [URLQueryItem(name: "warm", value: "\(index)")])) }
        guard await get(base) else { return "the origin did not answer" }
        let miss = await perGet { base.appending(queryItems: [URLQueryItem(name: "miss", value: "\($0)")]) }
        let hit = await perGet { _ in base }
        return "cache miss: \(miss) lock acquisitions per GET\nmemory hit: \(hit) lock acquisitions per GET"
        #else
        return "this build does not count locks: build with -Xswiftc -DURLLOADING_COUNT_LOCKS"
        #endif
    }
}
