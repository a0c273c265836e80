import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport
@testable import URLLoading

/// A delegate data task holds a bounded amount of memory whatever the
/// body's length: the copy kept for the cache stops at the largest tier's
/// 5%, and chunks wait in the transport (not in a queue of ours) while a
/// slow delegate catches up. Measured in a child process, which reports its
/// own peak RSS (`urlloading-test-helper delegate-body`).
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2)))) struct DelegateMemoryTests {
    static let block = TestOrigin.pattern(offset: 0, count: 1_000_003)
    /// Far above what the client needs (about 30 MiB), far below the bodies.
    static let rssLimitKiB = Sanitizer.memoryBound(kilobytes: 96 * 1024)

    struct Report: Decodable {
        var bytes: Int64
        var error: String
        var peakRSSKiB: Int
    }

    static func run(_ origin: TestOrigin, path: String, microsecondsPerChunk: Int) async throws -> Report {
        let result = try await ChildProcess.run(ChildProcess.helper, ["delegate-body", origin.url(path).absoluteString, "\(microsecondsPerChunk)"])
        #expect(result.status == 0, "\(result.standardError)")
        let line = try #require(result.standardOutput.split(separator: "\n").last, "no report: \(result.standardError)")
        return try JSONDecoder().decode(Report.self, from: Data(line.utf8))
    }

    @Test("A chunked body of 512 MiB with no Content-Length to a delegate that keeps nothing: peak RSS bounded")
    func chunkedBodyNotKeptForCache() async throws {
        let origin = try await TestOrigin.start(ownThread: true)
        defer { Task { try await origin.shutdown() } }
        let count = 512 << 20
        origin.route(
            "/chunked",
            response: ScriptedResponse(
                headers: [HeaderField("Cache-Control", "max-age=600")],
                parts: [.cycle(of: Self.block, offset: 0, count: count)], framing: .chunked))
        let report = try await Self.run(origin, path: "/chunked", microsecondsPerChunk: 0)
        #expect(report.bytes == Int64(count) && report.error.isEmpty, "\(report)")
        #expect(report.peakRSSKiB > 0 && report.peakRSSKiB < Self.rssLimitKiB, "peak RSS \(report.peakRSSKiB) KiB")
    }

    @Test("A slow delegate reading 256 MiB: chunks wait in the transport, peak RSS bounded")
    func slowDelegateHasBackPressure() async throws {
        let origin = try await TestOrigin.start(ownThread: true)
        defer { Task { try await origin.shutdown() } }
        let count = 256 << 20
        origin.route(
            "/long",
            response: ScriptedResponse(
                parts: [.cycle(of: Self.block, offset: 0, count: count)], framing: .contentLength))
        let report = try await Self.run(origin, path: "/long", microsecondsPerChunk: 40)
        #expect(report.bytes == Int64(count) && report.error.isEmpty, "\(report)")
        #expect(report.peakRSSKiB > 0 && report.peakRSSKiB < Self.rssLimitKiB, "peak RSS \(report.peakRSSKiB) KiB")
    }
}

/// A head of 50 MB is refused at the transport's limit, without holding
/// it: measured in a child process, which reports its own peak RSS.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2)))) struct HugeHeadMemoryTests {
    @Test("A 50 MB response head fails as a bad response, and the client's peak RSS stays far below 50 MB")
    func hugeHead() async throws {
        let origin = try await TestOrigin.start(ownThread: true)
        defer { Task { try await origin.shutdown() } }
        origin.route("/huge", response: .hugeHead(bytes: 50_000_000))
        let result = try await ChildProcess.run(ChildProcess.helper, ["fetch-rss", origin.url("/huge").absoluteString])
        #expect(result.status == 0, "\(result.standardError)")
        struct Report: Decodable { var outcome: String; var peakRSSKiB: Int }
        let line2 = try #require(result.standardOutput.split(separator: "\n").last, "no report")
        let report = try JSONDecoder().decode(Report.self, from: Data(line2.utf8))
        print("huge head: \(report)")
        #expect(report.outcome == "bad server response", "\(report)")
        #expect(
            report.peakRSSKiB > 0 && report.peakRSSKiB < Sanitizer.memoryBound(kilobytes: 64 * 1024), "peak RSS (the program alone takes about 40 MiB; the head is 48 MiB) \(report.peakRSSKiB) KiB")
    }
}

/// Download files live in a folder private to the user:
/// another user's (or an open) `urlloading-downloads` is refused, never
/// written into; files are 0600 from their first byte.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct DownloadFolderTests {
    static func run(tmp: String, origin: TestOrigin) async throws -> String {
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = tmp
        let result = try await ChildProcess.run(ChildProcess.helper, ["download-modes", origin.url("/file").absoluteString], environment: environment)
        #expect(result.status == 0, "\(result.standardError)")
        return result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("Downloads go to a folder created 0700, in files created 0600; a folder others can open is refused")
    func privateFolder() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        origin.route("/file", response: ScriptedResponse(body: "contents"))
        let fresh = TemporaryDirectory()
        #expect(try await Self.run(tmp: fresh.url.path, origin: origin) == "file 600 folder 700 in urlloading-downloads")
        let open = TemporaryDirectory()
        let folder = open.path("urlloading-downloads")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        #expect(chmod(folder, 0o777) == 0)
        let refused = try await Self.run(tmp: open.url.path, origin: origin)
        #expect(refused.hasPrefix("error cannot write file") && refused.contains("read or written by others"), "\(refused)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty)
        let linked = TemporaryDirectory()
        try FileManager.default.createSymbolicLink(atPath: linked.path("urlloading-downloads"), withDestinationPath: folder)
        let viaLink = try await Self.run(tmp: linked.url.path, origin: origin)
        #expect(viaLink.contains("not a folder"), "\(viaLink)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty)
    }
}

/// A task made for a delegate on a session that has none still reads its
/// whole body: with nobody to deliver to, nothing waits in the backlog.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct NoDelegateBacklogTests {
    @Test("A delegate data task without any delegate completes a body far past the 2 MiB backlog")
    func noDelegateNoBacklog() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        origin.route("/big", response: ScriptedResponse(parts: [.pattern(offset: 0, count: 8 << 20)], framing: .contentLength))
        let session = Session(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let task = session.dataTask(with: URLRequest(url: origin.url("/big")))
        task.resume()
        #expect(await eventually { task.state == SessionTask.State.completed }, "the task stalled after \(task.countOfBytesReceived) bytes")
        #expect(task.countOfBytesReceived == Int64(8 << 20) && task.error == nil)
    }
}
