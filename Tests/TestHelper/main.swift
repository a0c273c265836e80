// A child process for tests that need more than one process on the same
// files (SQLite locking, crash safety). Each mode is one command line:
//
//   urlloading-test-helper storage-writer <db-path> <tag> <count>
//       Opens <db-path> with the helper schema and inserts <count> rows
//       tagged <tag>, one immediate transaction each; prints "wrote <count>".
//
//   urlloading-test-helper cache-store-loop <cache-dir> <first-index>
//       Stores fixture responses (TestSupport.CacheFixtures) for
//       https://fixture.test/loop/<i> from <first-index> on, for ever,
//       printing "stored <i>" after each; the test kills it with SIGKILL.
//
//   urlloading-test-helper cache-writer <cache-dir> <tag> <count>
//       Stores <count> fixture responses for https://fixture.test/<tag>/<i>,
//       reads each back and checks its body; prints "ok <count>".
//
//   urlloading-test-helper hold-lock <db-path>
//       Holds an exclusive transaction on the database, prints "locked",
//       and keeps it until the test kills it.
//
//   urlloading-test-helper demo-origin
//       Serves a small cacheable site on a loopback port (a fresh article,
//       one that must be revalidated, an image, a page setting a cookie),
//       prints "origin <base-url>", and runs until its standard input closes.
//
//   urlloading-test-helper cookie-fetch <app-id> <url>
//       GETs <url> through a default-configuration session of application
//       <app-id> (stores under $XDG_DATA_HOME) and prints "status <code>"
//       and "cookies <name,...>" (the store's cookie names, sorted).
//
//   urlloading-test-helper big-transfer download <url> <destination>
//   urlloading-test-helper big-transfer upload <url> <file>
//       Downloads <url> with a download task (moving the file to
//       <destination>), or uploads <file> with an upload task, and prints
//       one line of JSON: the process's peak RSS in KiB, the progress
//       reports' count, last totals and whether they only grew, the status
//       and the error. A process of its own, so that the peak RSS is this
//       transfer's alone and not that of tests running beside it.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Storage
import Synchronization
import TestSupport
@testable import URLLoading

let helperSchema = [
    Migration(version: 1, name: "helper_items", sql: "CREATE TABLE items(id INTEGER PRIMARY KEY, tag TEXT NOT NULL, n INTEGER NOT NULL)"),
]

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("urlloading-test-helper: \(message)\n".utf8))
    exit(1)
}

let arguments = CommandLine.arguments.dropFirst()
switch arguments.first {
case "storage-writer":
    let rest = Array(arguments.dropFirst())
    guard rest.count == 3, let count = Int(rest[2]) else { fail("usage: storage-writer <db-path> <tag> <count>") }
    do {
        let database = try Database(path: rest[0], migrations: helperSchema)
        for n in 0..<count {
            try database.write { connection in
                try connection.run("INSERT INTO items(tag, n) VALUES (?, ?)", [.text(rest[1]), .integer(Int64(n))])
            }
        }
        print("wrote \(count)")
    } catch {
        fail("\(error)")
    }
case "cache-store-loop":
    let rest = Array(arguments.dropFirst())
    guard rest.count == 2, let first = Int(rest[1]) else { fail("usage: cache-store-loop <cache-dir> <first-index>") }
    do {
        let cache = try ResponseCache(memoryCapacity: 0, diskCapacity: 1 << 30, directory: URL(fileURLWithPath: rest[0]))
        var index = first
        while true {
            storeFixture(cache, url: "https://fixture.test/loop/\(index)", index: index)
            // Unbuffered, so the test sees each line as it is written.
            FileHandle.standardOutput.write(Data("stored \(index)\n".utf8))
            index += 1
        }
    } catch {
        fail("\(error)")
    }
case "cache-writer":
    let rest = Array(arguments.dropFirst())
    guard rest.count == 3, let count = Int(rest[2]) else { fail("usage: cache-writer <cache-dir> <tag> <count>") }
    do {
        let cache = try ResponseCache(memoryCapacity: 0, diskCapacity: 1 << 30, directory: URL(fileURLWithPath: rest[0]))
        for index in 0..<count {
            storeFixture(cache, url: "https://fixture.test/\(rest[1])/\(index)", index: index)
        }
        for index in 0..<count {
            let url = "https://fixture.test/\(rest[1])/\(index)"
            guard let key = CachePolicy.primaryKey(URL(string: url)!), let stored = cache.lookup(key: key, requestHeaders: []) else {
                fail("entry \(url) missing")
            }
            guard stored.body == CacheFixtures.body(for: url, index: index) else { fail("entry \(url) has a wrong body") }
        }
        print("ok \(count)")
    } catch {
        fail("\(error)")
    }
case "hold-lock":
    let rest = Array(arguments.dropFirst())
    guard rest.count == 1 else { fail("usage: hold-lock <db-path>") }
    do {
        let connection = try Connection(path: rest[0], busyTimeout: .seconds(1))
        try connection.execute("BEGIN EXCLUSIVE")
        FileHandle.standardOutput.write(Data("locked\n".utf8))
        while true { sleep(60) }
    } catch {
        fail("\(error)")
    }
case "demo-origin":
    do {
        let origin = try await TestOrigin.start()
        origin.route("/articles/1", response: ScriptedResponse(headers: [
            HeaderField("Cache-Control", "max-age=600"), HeaderField("ETag", "\"a1\""), HeaderField("Content-Type", "text/html"),
        ], body: "<h1>Article one</h1>\n"))
        origin.route("/articles/2", Routes.conditional(etag: "\"a2\"", body: Array("<h1>Article two</h1>\n".utf8), headers: [
            HeaderField("Cache-Control", "no-cache"), HeaderField("Content-Type", "text/html"),
        ]))
        origin.route("/logo.png", response: ScriptedResponse(headers: [
            HeaderField("Cache-Control", "public, max-age=86400"), HeaderField("Content-Type", "image/png"),
        ], body: [UInt8](repeating: 0x89, count: 4096)))
        origin.route("/login", response: ScriptedResponse(headers: [
            HeaderField("Set-Cookie", "session=demo-secret; Path=/; HttpOnly; Max-Age=3600"), HeaderField("Cache-Control", "no-store"),
        ], body: "welcome\n"))
        FileHandle.standardOutput.write(Data("origin \(origin.baseURL.absoluteString)\n".utf8))
        // Until the parent closes our standard input.
        while FileHandle.standardInput.availableData.count > 0 {}
        try await origin.shutdown()
    } catch {
        fail("\(error)")
    }
case "cookie-fetch":
    let rest = Array(arguments.dropFirst())
    guard rest.count == 2, let url = URL(string: rest[1]) else { fail("usage: cookie-fetch <app-id> <url>") }
    do {
        var configuration = SessionConfiguration.default
        configuration.applicationIdentifier = rest[0]
        configuration.urlCache = nil
        let session = try Session(configuration: configuration)
        let (_, response) = try await session.data(from: url)
        print("status \((response as? HTTPURLResponse)?.statusCode ?? 0)")
        print("cookies \((session.cookieStore?.allCookies ?? []).map(\.name).sorted().joined(separator: ","))")
        session.finishTasksAndInvalidate()
    } catch {
        fail("\(error)")
    }
case "big-transfer":
    let rest = Array(arguments.dropFirst())
    guard rest.count == 3, ["download", "upload"].contains(rest[0]), let url = URL(string: rest[1]) else {
        fail("usage: big-transfer download|upload <url> <path>")
    }
    let path = URL(fileURLWithPath: rest[2])
    let delegate = ProgressCheckingDelegate(destination: rest[0] == "download" ? path : nil)
    do {
        var configuration = SessionConfiguration.ephemeral
        configuration.urlCache = nil
        let session = try Session(configuration: configuration, delegate: delegate)
        var request = URLRequest(url: url)
        if rest[0] == "download" {
            session.downloadTask(with: request).resume()
        } else {
            request.httpMethod = "PUT"
            session.uploadTask(with: request, fromFile: path).resume()
        }
        let report = await delegate.finished()
        session.finishTasksAndInvalidate()
        var line: [String: Any] = report
        line["peakRSSKiB"] = peakRSSKiB()
        let json = try JSONSerialization.data(withJSONObject: line, options: [.sortedKeys])
        print(String(decoding: json, as: UTF8.self))
    } catch {
        fail("\(error)")
    }
default:
    fail("unknown mode \(arguments.first ?? "(none)")")
}

/// This process's peak RSS in KiB (VmHWM). Not getrusage's ru_maxrss:
/// Linux carries that across execve, so a child spawned by a large test
/// process (posix_spawn shares its memory until the exec) would report the
/// parent's peak.
func peakRSSKiB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return -1 }
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
}

func storeFixture(_ cache: ResponseCache, url: String, index: Int) {
    let now = Date().timeIntervalSince1970
    // Force-unwraps: the fixture URLs are literals of this program.
    let key = CachePolicy.primaryKey(URL(string: url)!)!
    cache.store(StoredResponse(
        url: url, key: key, status: 200,
        responseHeaders: [("Cache-Control", "max-age=3600"), ("Content-Type", "application/octet-stream")],
        requestHeaders: [], body: CacheFixtures.body(for: url, index: index),
        requestTime: now, responseTime: now, storedAt: now))
}


/// Checks a big transfer's progress reports as they come: every report
/// adds exactly its bytes to the previous total, totals only grow, and the
/// expected total stays the same.
final class ProgressCheckingDelegate: SessionDelegate {
    struct Progress: Sendable {
        var reports = 0
        var total: Int64 = 0
        var expected: Int64?
        var consistent = true
        var status = 0
        var error: String?
        var moved = false
        var waiter: CheckedContinuation<[String: any Sendable], Never>?
        var done = false
    }

    let destination: URL?
    private let state = Mutex(Progress())

    init(destination: URL?) {
        self.destination = destination
    }

    private func record(_ bytes: Int64, total: Int64, expected: Int64) {
        state.withLock { progress in
            progress.reports += 1
            if total != progress.total + bytes || bytes <= 0 || (progress.expected.map { $0 != expected } ?? false) {
                progress.consistent = false
            }
            progress.total = total
            progress.expected = expected
        }
    }

    func session(_ session: Session, downloadTask: SessionTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        record(bytesWritten, total: totalBytesWritten, expected: totalBytesExpectedToWrite)
    }

    func session(_ session: Session, task: SessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        record(bytesSent, total: totalBytesSent, expected: totalBytesExpectedToSend)
    }

    func session(_ session: Session, downloadTask: SessionTask, didFinishDownloadingTo location: URL) {
        guard let destination else { return }
        let moved = (try? FileManager.default.moveItem(at: location, to: destination)) != nil
        state.withLock { $0.moved = moved }
    }

    func session(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
        let status = (task.response as? HTTPURLResponse)?.statusCode ?? 0
        let (waiter, report) = state.withLock { progress -> (CheckedContinuation<[String: any Sendable], Never>?, [String: any Sendable]) in
            progress.status = status
            progress.error = error.map { "\($0)" }
            progress.done = true
            defer { progress.waiter = nil }
            return (progress.waiter, Self.report(progress))
        }
        waiter?.resume(returning: report)
    }

    private static func report(_ progress: Progress) -> [String: any Sendable] {
        ["reports": progress.reports, "total": progress.total, "expected": progress.expected ?? -1,
         "consistent": progress.consistent, "status": progress.status, "error": progress.error ?? "", "moved": progress.moved]
    }

    /// Waits for the task's end and gives its report.
    func finished() async -> [String: any Sendable] {
        await withCheckedContinuation { continuation in
            let report = state.withLock { progress -> [String: any Sendable]? in
                if progress.done { return Self.report(progress) }
                progress.waiter = continuation
                return nil
            }
            if let report { continuation.resume(returning: report) }
        }
    }
}
