// A child process for tests that need more than one process on the same
// files (SQLite locking, crash safety). Each mode is one command line:
//
//   urlloading-test-helper storage-writer <db-path> <tag> <count>
//       Opens <db-path> with the helper schema and inserts <count> rows
//       tagged <tag>, one immediate transaction each; prints "wrote <count>".
//
//   urlloading-test-helper cache-store-loop <cache-dir> <first-index> [<keys>]
//       Stores fixture responses (TestSupport.CacheFixtures) for
//       https://fixture.test/loop/<i> from <first-index> on, for ever,
//       printing "stored <i>" after each; the test kills it with SIGKILL.
//       With <keys>, the URL's <i> goes round <first-index> ..< <first-index> + <keys>
//       (the printed number counts on).
//
//   urlloading-test-helper cache-writer <cache-dir> <tag> <count>
//       Stores <count> fixture responses for https://fixture.test/<tag>/<i>,
//       reads each back and checks its body; prints "ok <count>".
//
//   urlloading-test-helper hold-lock <db-path>
//       Holds an exclusive transaction on the database, prints "locked",
//       and keeps it until the test kills it.
//
//   urlloading-test-helper shared-session <url>
//       Checks Session.shared (one object, invalidation ignored, using
//       CookieStore.shared, CredentialStore.shared, ResponseCache.shared) and prints
//       "shared <body>" of a GET of <url> through it.
//
//   urlloading-test-helper cookie-fetch <app-id> <url>
//       GETs <url> through a default-configuration session of application
//       <app-id> (stores under $XDG_DATA_HOME) and prints "startup error:
//       <error>" for each store it could not open, "status <code>" and
//       "cookies <name,...>" (the store's cookie names, sorted).
//
//   urlloading-test-helper big-transfer download <url> <destination>
//   urlloading-test-helper big-transfer upload <url> <file>
//       Downloads <url> with a download task (moving the file to
//       <destination>), or uploads <file> with an upload task, and prints
//       one line of JSON: the process's peak RSS in KiB, the progress
//       reports' count, last totals and whether they only grew, the status
//       and the error. A process of its own, so that the peak RSS is this
//       transfer's alone and not that of tests running beside it.
//
//   urlloading-test-helper full-disk-fetch <cache-dir> <cookie-dir> <url> <count>
//       GETs <url> <count> times through an ephemeral session whose cache
//       lives in <cache-dir> and whose cookie store in <cookie-dir> (a
//       nearly full file system, made by the test); prints "status <code>
//       bytes <n>" per fetch. The store failures go to standard error.
//
//   urlloading-test-helper isolation-run ephemeral|default <base-url> <work-dir>
//       Runs one session of that configuration through every feature against
//       the isolation origin (Tests/URLLoadingTests/Isolation): cached GETs
//       small and large, cookies set and sent, Basic and Digest credentials of
//       every persistence, a download task (its file moved to
//       <work-dir>/downloads/delegate) and an async download (moved to
//       <work-dir>/downloads/async), an upload of <work-dir>/upload-source, a
//       redirect, then invalidation; a second session is invalidated with a
//       task running. Prints "ok" or fails. Run under strace by the test.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Storage
import Locking
import TestSupport
@testable import URLLoading

let helperSchema = [
    Migration(version: 1, name: "helper_items", sql: "CREATE TABLE items(id INTEGER PRIMARY KEY, tag TEXT NOT NULL, n INTEGER NOT NULL)")
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
            try database.write { (connection: Connection) throws(SQLiteError) in
                try connection.run("INSERT INTO items(tag, n) VALUES (?, ?)", [.text(rest[1]), .integer(Int64(n))])
            }
        }
        print("wrote \(count)")
    } catch {
        fail("\(error)")
    }
case "cache-store-loop":
    let rest = Array(arguments.dropFirst())
    guard rest.count == 2 || rest.count == 3, let first = Int(rest[1]) else { fail("usage: cache-store-loop <cache-dir> <first-index> [<keys>]") }
    // With <keys>, the stores go round that many keys (stored again,
    // replaced): the cache stays below its capacity however long the loop runs.
    let keys = rest.count == 3 ? Int(rest[2]).flatMap { $0 > 0 ? $0 : nil } : nil
    if rest.count == 3 && keys == nil { fail("cache-store-loop: <keys> must be a positive number") }
    do {
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 30, directory: URL(fileURLWithPath: rest[0]))
        var index = first
        while true {
            let slot = keys.map { first + (index - first) % $0 } ?? index
            storeFixture(cache, url: "https://fixture.test/loop/\(slot)", index: slot)
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
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 30, directory: URL(fileURLWithPath: rest[0]))
        for index in 0..<count {
            storeFixture(cache, url: "https://fixture.test/\(rest[1])/\(index)", index: index)
        }
        for index in 0..<count {
            let url = "https://fixture.test/\(rest[1])/\(index)"
            guard let key = CachePolicy.primaryKey(URL(string: url)!), let stored = cache.lookup(key: key, requestHeaders: []) else {
                fail("entry \(url) missing")
            }
            guard (try? stored.wholeBody()) == CacheFixtures.body(for: url, index: index) else { fail("entry \(url) has a wrong body") }
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
case "shared-session":
    // Session.shared in a process of its own (its stores are the default
    // ones, under the XDG folders the test gives): one object, invalidation
    // ignored, a fetch after it works. Prints "shared <body>".
    let rest = Array(arguments.dropFirst())
    guard rest.count == 1, let url = URL(string: rest[0]) else { fail("usage: shared-session <url>") }
    guard Session.shared === Session.shared, Session.shared.configuration.kind == .default else { fail("not one default session") }
    Session.shared.finishTasksAndInvalidate()
    Session.shared.invalidateAndCancel()
    guard Session.shared.configuration.httpCookieStorage === CookieStore.shared,
        Session.shared.configuration.urlCredentialStorage === CredentialStore.shared,
        Session.shared.configuration.urlCache === ResponseCache.shared
    else { fail("the shared session does not use the shared stores") }
    do {
        let (data, _) = try await Session.shared.data(from: url)
        print("shared \(String(decoding: data, as: UTF8.self))")
        print("cookies \(CookieStore.shared.cookies(for: url)?.map(\.headerPair).joined(separator: ";") ?? "nil")")
        CredentialStore.shared.set(Credential(user: "ann", password: "pw", persistence: .permanent), for: ProtectionSpace(url: url) ?? ProtectionSpace(host: "x", port: 1, protocol: "http"))
        print("stores \(CookieStore.shared.path ?? "memory") \(CredentialStore.shared.path ?? "memory")")
        for error in [CookieStore.shared.startupError, CredentialStore.shared.startupError, ResponseCache.shared.startupError].compactMap({ $0 }) {
            print("startup error: \(error.kind)")
        }
    } catch {
        fail("\(error)")
    }
case "cookie-fetch":
    let rest = Array(arguments.dropFirst())
    guard rest.count == 2, let url = URL(string: rest[1]) else { fail("usage: cookie-fetch <app-id> <url>") }
    do {
        let configuration = SessionConfiguration.default
        configuration.applicationIdentifier = rest[0]
        configuration.urlCache = nil
        let session = Session(configuration: configuration)
        for error in session.startupErrors { print("startup error: \(error)") }
        let (_, response) = try await session.data(from: url)
        print("status \((response as? HTTPURLResponse)?.statusCode ?? 0)")
        print("cookies \((session.cookieStore?.allCookies ?? []).map(\.name).sorted().joined(separator: ","))")
        session.finishTasksAndInvalidate()
    } catch {
        fail("\(error)")
    }
case "full-disk-fetch":
    let rest = Array(arguments.dropFirst())
    guard rest.count == 4, let url = URL(string: rest[2]), let count = Int(rest[3]), (1...100).contains(count) else {
        fail("usage: full-disk-fetch <cache-dir> <cookie-dir> <url> <count>")
    }
    do {
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 100 << 20, directory: URL(fileURLWithPath: rest[0]))
        configuration.httpCookieStorage = try CookieStore(directory: URL(fileURLWithPath: rest[1]))
        let session = Session(configuration: configuration)
        for _ in 0..<count {
            // Each request asks the network: a stored copy would hide a write that failed.
            var request = URLRequest(url: url)
            request.cachePolicy = .reloadIgnoringLocalCacheData
            let (data, response) = try await session.data(for: request)
            print("status \((response as? HTTPURLResponse)?.statusCode ?? 0) bytes \(data.count)")
        }
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
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = nil
        let session = Session(configuration: configuration, delegate: delegate)
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
case "store-loop":
    // As a short-lived program would: each round opens the cookie store and
    // the cache afresh, sets a cookie, stores a response, and closes them.
    let rest = Array(arguments.dropFirst())
    guard rest.count == 3, let rounds = Int(rest[2]), rounds > 0 else { fail("usage: store-loop <cache-dir> <data-dir> <rounds>") }
    for round in 0..<rounds {
        do {
            let cookies = try CookieStore(directory: URL(fileURLWithPath: rest[1]), keepSessionCookies: true)
            let url = URL(string: "https://loop.test/\(getpid())/\(round)")!
            guard cookies.setCookies(["c\(getpid())=\(round); Max-Age=600"], for: url, mainDocumentURL: url, policy: .always).count == 1 else {
                fail("round \(round): the cookie was refused")
            }
            try cookies.flush()
            let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 30, directory: URL(fileURLWithPath: rest[0]))
            storeFixture(cache, url: url.absoluteString, index: round)
            cache.flush()
        } catch {
            fail("round \(round): \(error)")
        }
    }
    print("rounds \(rounds)")
case "fetch-rss":
    // One GET through an ephemeral session; prints how it ended and the
    // process's peak RSS.
    let rest = Array(arguments.dropFirst())
    guard rest.count == 1, let url = URL(string: rest[0]) else { fail("usage: fetch-rss <url>") }
    do {
        let session = Session(configuration: .ephemeral)
        var outcome = "ok"
        do {
            _ = try await session.data(from: url)
        } catch let error as URLError {
            outcome = "\(error.sessionError?.code.description ?? "\(error.code)")"
        }
        session.finishTasksAndInvalidate()
        print("{\"outcome\": \"\(outcome)\", \"peakRSSKiB\": \(peakRSSKiB())}")
    } catch {
        fail("\(error)")
    }
case "keyring":
    runKeyring(Array(arguments.dropFirst()))
case "credentials":
    await runCredentials(Array(arguments.dropFirst()))
case "fleet-worker":
    await runFleetWorker(Array(arguments.dropFirst()))
case "background-app":
    runBackgroundApp(Array(arguments.dropFirst()))
case "cache-populate":
    cachePopulate(Array(arguments.dropFirst()))
case "cache-serve-rss":
    cacheServeRSS(Array(arguments.dropFirst()))
case "connect-as":
    connectAs(Array(arguments.dropFirst()))
case "openapi-transfer":
    await openAPITransfer(Array(arguments.dropFirst()))
case "http-types-responses":
    await httpTypesResponses(Array(arguments.dropFirst()))
case "delegate-body":
    // A delegate data task over a body of any length; the delegate keeps
    // only a count and takes `micros` per chunk (a slow reader). Prints the
    // bytes seen and the process's peak RSS.
    let rest = Array(arguments.dropFirst())
    guard rest.count == 2, let url = URL(string: rest[0]), let micros = UInt32(rest[1]) else {
        fail("usage: delegate-body <url> <microseconds-per-chunk>")
    }
    let delegate = CountingDelegate(microsecondsPerChunk: micros)
    let session = Session(configuration: .ephemeral, delegate: delegate)
    session.dataTask(with: URLRequest(url: url)).resume()
    let (bytes, error) = await delegate.finished()
    session.finishTasksAndInvalidate()
    print("{\"bytes\": \(bytes), \"error\": \"\(error)\", \"peakRSSKiB\": \(peakRSSKiB())}")
case "download-modes":
    // One download task; prints the modes of the file and folder it was
    // handed ("file 600 folder 700 in <folder>"), or "error <error>".
    let rest = Array(arguments.dropFirst())
    guard rest.count == 1, let url = URL(string: rest[0]) else { fail("usage: download-modes <url>") }
    let delegate = ModeReportingDelegate()
    let session = Session(configuration: .ephemeral, delegate: delegate)
    session.downloadTask(with: URLRequest(url: url)).resume()
    print(await delegate.finished())
    session.finishTasksAndInvalidate()
case "isolation-run":
    let rest = Array(arguments.dropFirst())
    guard rest.count == 3, ["ephemeral", "default"].contains(rest[0]), let base = URL(string: rest[1]) else {
        fail("usage: isolation-run ephemeral|default <base-url> <work-dir>")
    }
    do {
        try await IsolationRun(ephemeral: rest[0] == "ephemeral", base: base, work: URL(fileURLWithPath: rest[2])).run()
        print("ok")
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
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
    else { return -1 }
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
}

func storeFixture(_ cache: ResponseCache, url: String, index: Int) {
    let now = Date().timeIntervalSince1970
    // Force-unwraps: the fixture URLs are literals of this program.
    let key = CachePolicy.primaryKey(URL(string: url)!)!
    cache.store(
        StoredResponse(
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
    private let state = Lock(Progress())

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

    func urlSession(_ session: Session, downloadTask: SessionTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        record(bytesWritten, total: totalBytesWritten, expected: totalBytesExpectedToWrite)
    }

    func urlSession(_ session: Session, task: SessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        record(bytesSent, total: totalBytesSent, expected: totalBytesExpectedToSend)
    }

    func urlSession(_ session: Session, downloadTask: SessionTask, didFinishDownloadingTo location: URL) {
        guard let destination else { return }
        let moved = (try? FileManager.default.moveItem(at: location, to: destination)) != nil
        state.withLock { $0.moved = moved }
    }

    func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
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
        [
            "reports": progress.reports, "total": progress.total, "expected": progress.expected ?? -1,
            "consistent": progress.consistent, "status": progress.status, "error": progress.error ?? "", "moved": progress.moved,
        ]
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

/// The isolation suite's tour of the session's features (see the mode's
/// comment at the top).
struct IsolationRun {
    let ephemeral: Bool
    let base: URL
    let work: URL

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Answers challenges by realm (its name is the persistence), moves
    /// delegate downloads, and signals invalidation.
    final class Delegate: SessionDelegate {
        let downloads: URL
        private let invalidated = CompletionLatch()
        init(downloads: URL) { self.downloads = downloads }

        func urlSession(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge) async -> (Session.AuthChallengeDisposition, Credential?) {
            guard challenge.previousFailureCount == 0 else { return (.cancelAuthenticationChallenge, nil) }
            let persistence: Credential.Persistence
            switch challenge.protectionSpace.realm {
            case "none": persistence = .none
            case "session": persistence = .forSession
            default: persistence = .permanent
            }
            return (.useCredential, Credential(user: "tenant", password: "s3cret-\(challenge.protectionSpace.realm ?? "")", persistence: persistence))
        }

        func urlSession(_ session: Session, downloadTask: SessionTask, didFinishDownloadingTo location: URL) {
            try? FileManager.default.moveItem(at: location, to: downloads.appendingPathComponent("delegate"))
        }

        func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
            guard task.kind == .download else { return }
            downloadDone.continuation.yield()
        }

        private let downloadDone = AsyncStream.makeStream(of: Void.self)

        /// Waits for the delegate download task's end.
        func waitForDownload() async {
            var iterator = downloadDone.stream.makeAsyncIterator()
            _ = await iterator.next()
        }

        func urlSession(_ session: Session, didBecomeInvalidWithError error: (any Error)?) { invalidated.open() }

        func waitForInvalidation() async { await invalidated.wait() }
    }

    func url(_ path: String) -> URL { URL(string: base.absoluteString + path) ?? base }

    func expect(_ condition: Bool, _ what: String) throws {
        if !condition { throw Failure(description: what) }
    }

    func body(_ session: Session, _ path: String) async throws -> (Int, String) {
        let (data, response) = try await session.data(for: URLRequest(url: url(path)))
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    func run() async throws {
        let configuration = ephemeral ? SessionConfiguration.ephemeral : .default
        configuration.applicationIdentifier = "isolation"
        let downloads = work.appendingPathComponent("downloads")
        let delegate = Delegate(downloads: downloads)
        let session = Session(configuration: configuration, delegate: delegate)
        // Cached GETs, small and large: the second of each is a hit.
        for path in ["/small", "/large", "/small", "/large"] {
            let (status, text) = try await body(session, path)
            try expect(status == 200 && !text.isEmpty, "GET \(path): \(status)")
        }
        // Cookies set, then sent.
        _ = try await body(session, "/set-cookie")
        let (_, cookies) = try await body(session, "/echo-cookie")
        try expect(cookies.contains("persistent=p1") && cookies.contains("transient=t1"), "cookies sent: \(cookies)")
        // Basic with every persistence, Digest permanent; each twice (pre-emptive the second time).
        for path in ["/basic/none", "/basic/session", "/basic/permanent", "/digest", "/basic/session", "/digest"] {
            let (status, text) = try await body(session, path)
            try expect(status == 200, "GET \(path): \(status) \(text)")
        }
        // Downloads: a delegate download task, and an async download whose file is ours.
        session.downloadTask(with: URLRequest(url: url("/download"))).resume()
        await delegate.waitForDownload()
        try expect(FileManager.default.fileExists(atPath: downloads.appendingPathComponent("delegate").path), "delegate download moved")
        let (file, _) = try await session.download(for: URLRequest(url: url("/download")))
        try FileManager.default.moveItem(at: file, to: downloads.appendingPathComponent("async"))
        // An upload from a file, and a redirect.
        var upload = URLRequest(url: url("/upload"))
        upload.httpMethod = "PUT"
        let (_, uploaded) = try await session.upload(for: upload, fromFile: work.appendingPathComponent("upload-source"))
        try expect((uploaded as? HTTPURLResponse)?.statusCode == 201, "upload")
        let (status, _) = try await body(session, "/redirect")
        try expect(status == 200, "redirect: \(status)")
        session.finishTasksAndInvalidate()
        await delegate.waitForInvalidation()
        // A second session, invalidated while a task runs.
        let second = Session(configuration: configuration, delegate: Delegate(downloads: downloads))
        let slow = second.dataTask(with: url("/slow"))
        slow.resume()
        _ = try await body(second, "/set-cookie")
        second.invalidateAndCancel()
    }
}
