import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import URLLoading

/// `resume()` latency: how long the caller's thread spends in
/// `resume()` for a task that a disk cache serves from a 256 MiB entry,
/// against a task with no cache, in one child process. `resume()` only
/// schedules, so both should take microseconds; the entry's first chunk
/// and its end are timed too.
enum ResumeBenchmark {
    static let entryBytes = 256 << 20
    static let runs = 15

    /// Counts a delegate task's bytes and signals its end.
    final class Counting: SessionDataDelegate, Sendable {
        let counts = Mutex<(bytes: Int, firstByte: UInt64, failure: String?)>((0, 0, nil))
        let done = DispatchSemaphore(value: 0)

        func urlSession(_ session: Session, dataTask: SessionTask, didReceive data: Data) {
            counts.withLock { counts in
                if counts.bytes == 0 { counts.firstByte = now() }
                counts.bytes += data.count
            }
        }

        func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
            counts.withLock { $0.failure = error.map { "\($0)" } }
            done.signal()
        }

        func reset() {
            counts.withLock { $0 = (0, 0, nil) }
        }
    }

    /// `urlloading-bench resume-child <base-url>`: prints
    /// "<resume µs, disk entry> <first chunk ms> <whole entry ms> <resume µs, no cache> <peak RSS KiB>",
    /// medians of `runs` tasks each.
    static func child(base: String) -> String {
        guard let small = URL(string: base + "/1k") else { fail("bad URL \(base)") }
        // Never fetched: only the cache can answer it.
        guard let big = URL(string: "http://127.0.0.1:9/resume-bench") else { fail("bad URL") }
        let directory = scratchDirectory("resume")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache: ResponseCache
        do {
            // Large enough that the 5% rule admits the entry.
            cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 8 << 30, directory: URL(fileURLWithPath: directory))
        } catch {
            fail("cannot open a cache: \(error)")
        }
        guard
            let response = HTTPURLResponse(
                url: big, statusCode: 200, httpVersion: "HTTP/1.1",
                headerFields: ["Cache-Control": "max-age=100000", "Content-Type": "application/octet-stream"])
        else { fail("cannot build a response") }
        cache.storeCachedResponse(CachedResponse(response: response, data: Data(count: entryBytes)), for: URLRequest(url: big))
        // The peak from here on: storing held the entry in memory once.
        try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)

        let delegate = Counting()
        let cached = SessionConfiguration.ephemeral
        cached.urlCache = cache
        cached.requestCachePolicy = .returnCacheDataDontLoad
        let cachedSession = Session(configuration: cached, delegate: delegate, delegateQueue: nil)
        let plain = SessionConfiguration.ephemeral
        plain.urlCache = nil
        let plainSession = Session(configuration: plain, delegate: delegate, delegateQueue: nil)

        func run(_ session: Session, _ url: URL, expecting bytes: Int) -> (resume: Double, firstByte: Double, total: Double) {
            delegate.reset()
            let task = session.dataTask(with: url)
            let start = now()
            task.resume()
            let resumed = now()
            guard delegate.done.wait(timeout: .now() + 120) == .success else { fail("no completion within 120 s") }
            let end = now()
            let counts = delegate.counts.withLock { $0 }
            if let failure = counts.failure { fail("the task failed: \(failure)") }
            guard counts.bytes == bytes else { fail("\(counts.bytes) bytes instead of \(bytes): was the entry stored?") }
            return (Double(resumed - start) / 1e3, Double(counts.firstByte - start) / 1e6, Double(end - start) / 1e6)
        }
        _ = run(plainSession, small, expecting: 1024)  // a connection, and the session's first-use costs
        var disk: [(resume: Double, firstByte: Double, total: Double)] = []
        var none: [Double] = []
        for _ in 0..<runs {
            disk.append(run(cachedSession, big, expecting: entryBytes))
            none.append(run(plainSession, small, expecting: 1024).resume)
        }
        cachedSession.finishTasksAndInvalidate()
        plainSession.finishTasksAndInvalidate()
        return "\(median(disk.map(\.resume))) \(median(disk.map(\.firstByte))) \(median(disk.map(\.total))) \(median(none)) \(SessionBenchmark.peakRSSKiB())"
    }

    /// Runs the child and adds its line and ratio.
    static func run(base: String, into table: inout [(figure: String, reference: String, ratio: Double)], lines: inout [String]) {
        let text = runChildText(["resume-child", base])
        let parts = text.split(separator: " ").compactMap { Double($0) }
        guard parts.count == 5 else { fail("resume-child printed \(text)") }
        lines.append(
            "resume() of a task served from a 256 MiB disk entry (median of \(runs)): \(formatted(parts[0])) µs in resume(), "
                + "first chunk after \(formatted(parts[1])) ms, whole entry after \(formatted(parts[2])) ms; "
                + "resume() with no cache \(formatted(parts[3])) µs; peak RSS \(Int(parts[4] / 1024)) MiB")
        table.append(("resume-256m-disk", "resume-no-cache", parts[0] / max(parts[3], 0.001)))
    }
}
