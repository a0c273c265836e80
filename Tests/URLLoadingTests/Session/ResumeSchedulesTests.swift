import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// `resume()` only schedules work: the first hop's cookie header,
/// cache lookup and credentials are decided on the task's own context, so
/// a caller's thread never waits on a disk or another process's lock.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2)))) struct ResumeSchedulesTests {
    /// Holds the task's context in `didCreateTask` until the test lets go:
    /// whatever the task does on its context cannot have happened before.
    final class HeldAtCreation: SessionDataDelegate {
        let release = DispatchSemaphore(value: 0)
        func urlSession(_ session: Session, didCreateTask task: SessionTask) {
            _ = release.wait(timeout: .now() + 60)
        }
    }

    static func stored(_ url: URL, body: String, at time: Double) throws -> StoredResponse {
        let key = try #require(CachePolicy.primaryKey(url))
        return StoredResponse(
            url: url.absoluteString, key: key, status: 200, responseHeaders: HeaderFields([HeaderFields.Field("Cache-Control", "max-age=100000000")]),
            requestHeaders: HeaderFields(), body: Data(body.utf8), requestTime: time, responseTime: time, storedAt: time)
    }

    @Test("resume() returns before the cache is looked up; the lookup and the answer come on the task's context")
    func resumeLooksNothingUp() async throws {
        let origin = try await TestOrigin.start()
        let directory = TemporaryDirectory()
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 64 << 20, directory: directory.url)
        let url = origin.url("/stored")
        cache.store(try Self.stored(url, body: "from the cache", at: Date().timeIntervalSince1970))
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = cache
        let delegate = HeldAtCreation()
        let session = Session(configuration: configuration, delegate: delegate, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let done = CompletionLatch()
        let body = Lock<Data?>(nil)
        let task = session.dataTask(with: url) { data, _, _ in
            body.withLock { $0 = data }
            done.open()
        }
        let before = cache.lookupCount
        task.resume()
        #expect(cache.lookupCount == before, "resume() looked the cache up on the caller's thread")
        delegate.release.signal()
        await done.wait()
        #expect(cache.lookupCount == before + 1)
        #expect(body.withLock { $0 } == Data("from the cache".utf8))
        #expect(origin.requests(to: "/stored").isEmpty)
        try await origin.shutdown()
    }

    @Test("Another process holds Cache.sqlite's write lock while the lookup must write: resume() returns at once and the task completes from the cache while the lock is held")
    func lockedCacheDoesNotBlockResume() async throws {
        let origin = try await TestOrigin.start()
        let directory = TemporaryDirectory()
        // Writers wait up to 50 s for the lock: a resume() that waited would not return within the bound below.
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 64 << 20, directory: directory.url, busyTimeout: .seconds(50))
        // 256 entries last used long ago: each lookup records a use, and the 256th writes them all.
        let old = Date().timeIntervalSince1970 - 3600
        let urls = (0..<CacheLedger.touchBatch).map { origin.url("/e/\($0)") }
        for url in urls { cache.store(try Self.stored(url, body: "entry", at: old), now: old) }
        for url in urls.dropLast() {
            _ = cache.lookup(key: try #require(CachePolicy.primaryKey(url)), requestHeaders: HeaderFields())
        }
        let holder = try ChildProcess.startWithOutputLines(ChildProcess.helper, ["hold-lock", directory.path(DiskTier.databaseName)])
        defer { holder.kill(SIGKILL) }
        #expect(await holder.nextLine() == "locked")
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = cache
        let session = Session(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        let done = CompletionLatch()
        let body = Lock<Data?>(nil)
        let task = session.dataTask(with: try #require(urls.last)) { data, _, _ in
            body.withLock { $0 = data }
            done.open()
        }
        let returned = CompletionLatch()
        Thread.detachNewThread {
            task.resume()
            returned.open()
        }
        let resumed = Lock(false)
        Task {
            await returned.wait()
            resumed.withLock { $0 = true }
        }
        #expect(await eventually(within: .seconds(20)) { resumed.withLock { $0 } }, "resume() waited for the lock")
        // Nor does the answer: the batch of uses the lookup filled is written
        // later, when the lock is free, and no lookup waits for it.
        #expect(await eventually(within: .seconds(20)) { done.isOpen }, "the task waited for the lock")
        holder.kill(SIGKILL)
        await done.wait()
        #expect(body.withLock { $0 } == Data("entry".utf8))
        #expect(origin.requests(to: "/e/255").isEmpty)
        try await origin.shutdown()
    }

    @Test("A 256 MiB response on disk: resume() returns before the cache is read; the delegate gets it in 256 KiB chunks read as they are delivered; peak RSS stays under 64 MiB above the baseline")
    func largeDiskEntryStreams() async throws {
        let directory = TemporaryDirectory()
        // Never fetched: the task may only be answered from the cache.
        let url = "http://127.0.0.1:9/big"
        let size = 256 << 20
        let populate = try await ChildProcess.run(ChildProcess.helper, ["cache-populate", directory.url.path, url, "\(size)"])
        #expect(populate.status == 0 && populate.standardOutput == "stored\n", "\(populate.standardError)")
        let served = try await ChildProcess.run(ChildProcess.helper, ["cache-serve-rss", directory.url.path, url])
        #expect(served.status == 0, "\(served.standardError)")
        let lines = served.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.count == 1, "\(lines)")
        let words = try #require(lines.last?.split(separator: " ").map(String.init))
        func number(after name: String) -> Int? { words.firstIndex(of: name).flatMap { Int(words[$0 + 1]) } }
        #expect(number(after: "lookups-at-resume") == 0, "resume() looked the cache up on the caller's thread")
        #expect(number(after: "bytes") == size)
        #expect((number(after: "largest") ?? .max) <= StoredBodyFile.chunkSize && (number(after: "chunks") ?? 0) >= size / StoredBodyFile.chunkSize)
        let grew = (number(after: "peak-kib") ?? .max) - (number(after: "baseline-kib") ?? 0)
        #expect(grew < Sanitizer.memoryBound(kilobytes: 64 << 10), "peak RSS grew by \(grew) KiB while delivering 256 MiB")
    }
}
