import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import TestSupport
@_spi(Tools) @testable import URLLoading

// urlloading-test-helper cache-populate <dir> <url> <bytes>
//     Stores a fresh 200 of <bytes> pattern bytes for <url> in the cache at <dir>.
// urlloading-test-helper cache-serve-rss <dir> <url>
//     A delegate data task for <url> served by the cache at <dir>; prints
//     "bytes <n> chunks <n> largest <n> lookups-at-resume <n>
//     baseline-kib <n> peak-kib <n>" (VmHWM before resume() and at the end;
//     the cache's lookups when resume() returned, the task's context held).

/// A disk tier large enough that the 5% rule admits a 256 MiB entry.
let bigCacheCapacity = 8 << 30

func cachePopulate(_ arguments: [String]) -> Never {
    guard arguments.count == 3, let url = URL(string: arguments[1]), let count = Int(arguments[2]), count >= 0 else {
        fail("usage: cache-populate <dir> <url> <bytes>")
    }
    do {
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: bigCacheCapacity, directory: URL(fileURLWithPath: arguments[0]))
        cache.store(
            url: url, status: 200, responseHeaders: [("Cache-Control", "max-age=100000"), ("Content-Type", "application/octet-stream")],
            body: Data(TestOrigin.pattern(offset: 0, count: count)))
        guard cache.snapshot(for: url) != nil else { fail("the entry was not stored") }
        print("stored")
        exit(0)
    } catch {
        fail("\(error)")
    }
}

final class CountingChunks: SessionDataDelegate {
    let counts = Lock<(bytes: Int, chunks: Int, largest: Int, mismatch: Bool)>((0, 0, 0, false))
    let done = DispatchSemaphore(value: 0)
    /// Holds the task's context at its creation until signalled: nothing
    /// the task does there can have happened before.
    let release = DispatchSemaphore(value: 0)

    func urlSession(_ session: Session, didCreateTask task: SessionTask) {
        _ = release.wait(timeout: .now() + 60)
    }

    func urlSession(_ session: Session, dataTask: SessionTask, didReceive data: Data) {
        counts.withLock { counts in
            // The pattern checked where each chunk starts: a misplaced chunk shows.
            if let first = data.first, first != TestOrigin.patternByte(at: counts.bytes) { counts.mismatch = true }
            counts.bytes += data.count
            counts.chunks += 1
            counts.largest = max(counts.largest, data.count)
        }
    }

    func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
        if let error { FileHandle.standardError.write(Data("task failed: \(error)\n".utf8)) }
        done.signal()
    }
}

func cacheServeRSS(_ arguments: [String]) -> Never {
    guard arguments.count == 2, let url = URL(string: arguments[1]) else { fail("usage: cache-serve-rss <dir> <url>") }
    do {
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: bigCacheCapacity, directory: URL(fileURLWithPath: arguments[0]))
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = cache
        configuration.requestCachePolicy = .returnCacheDataDontLoad
        let delegate = CountingChunks()
        let session = Session(configuration: configuration, delegate: delegate, delegateQueue: nil)
        let task = session.dataTask(with: url)
        let baseline = peakRSSKiB()
        task.resume()
        let lookups = cache.lookupCount
        delegate.release.signal()
        guard delegate.done.wait(timeout: .now() + 120) == .success else { fail("no completion within 120 s") }
        let counts = delegate.counts.withLock { $0 }
        guard !counts.mismatch else { fail("a chunk did not continue the body where the last ended") }
        print("bytes \(counts.bytes) chunks \(counts.chunks) largest \(counts.largest) lookups-at-resume \(lookups) baseline-kib \(baseline) peak-kib \(peakRSSKiB())")
        session.finishTasksAndInvalidate()
        exit(0)
    } catch {
        fail("\(error)")
    }
}
