import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport
@testable import URLLoading

/// A gibibyte each way in constant memory. The transfer runs in
/// a child process (`urlloading-test-helper big-transfer`), which reports
/// its own peak RSS: tests beside this one in the test process would
/// otherwise count in it. The origin sends the body from a repeated block
/// and stores the upload in a file, so neither costs memory either.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(5)))) struct BigTransferTests {
    static let gibibyte = 1 << 30
    /// Not a power of two long: a misplaced byte range shows.
    static let block = TestOrigin.pattern(offset: 0, count: 1_000_003)
    static let rssLimitKiB = Sanitizer.memoryBound(kilobytes: 64 * 1024)

    struct Report: Decodable {
        var peakRSSKiB: Int
        var reports: Int
        var total: Int64
        var expected: Int64
        var consistent: Bool
        var status: Int
        var error: String
        var moved: Bool
    }

    static func runHelper(_ arguments: [String]) async throws -> Report {
        let result = try await ChildProcess.run(ChildProcess.helper, ["big-transfer"] + arguments)
        #expect(result.status == 0, "\(result.standardError)")
        let line = try #require(result.standardOutput.split(separator: "\n").last, "no report: \(result.standardError)")
        return try JSONDecoder().decode(Report.self, from: Data(line.utf8))
    }

    /// Whether the file holds `count` bytes of the block's repetition.
    static func holdsCycle(_ url: URL, count: Int) throws -> Bool {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        let piece = 4 * 1_000_003  // whole blocks: every piece is the same
        var expected = Data()
        for _ in 0..<4 { expected.append(contentsOf: block) }
        var offset = 0
        while offset < count {
            let length = min(piece, count - offset)
            guard let data = try handle.read(upToCount: length), data.count == length,
                data == expected.prefix(length)
            else { return false }
            offset += length
        }
        return try handle.read(upToCount: 1)?.isEmpty ?? true
    }

    @Test("A 1 GiB download streams to its file with peak RSS under 64 MiB; progress only grows and its totals are exact")
    func download() async throws {
        let origin = try await TestOrigin.start(ownThread: true)
        origin.route(
            "/gibibyte",
            response: ScriptedResponse(
                status: 200, headers: [HeaderField("Content-Type", "application/octet-stream")],
                parts: [.cycle(of: Self.block, offset: 0, count: Self.gibibyte)], framing: .contentLength))
        let directory = TemporaryDirectory()
        let destination = directory.url.appendingPathComponent("gibibyte")
        let report = try await Self.runHelper(["download", origin.url("/gibibyte").absoluteString, destination.path])
        print("big transfer download-1g: peak RSS \(report.peakRSSKiB) KiB, \(report.reports) progress reports")
        #expect(report.error == "" && report.status == 200 && report.moved)
        #expect(report.consistent)
        #expect(report.total == Int64(Self.gibibyte) && report.expected == Int64(Self.gibibyte))
        #expect(report.reports > 1)
        #expect(report.peakRSSKiB < Self.rssLimitKiB, "peak RSS \(report.peakRSSKiB) KiB")
        #expect(try Self.holdsCycle(destination, count: Self.gibibyte))
        try await origin.shutdown()
    }

    @Test("A 1 GiB file uploads with peak RSS under 64 MiB; progress only grows and the origin gets every byte")
    func upload() async throws {
        let origin = try await TestOrigin.start(ownThread: true)
        let directory = TemporaryDirectory()
        let source = directory.url.appendingPathComponent("source")
        #expect(FileManager.default.createFile(atPath: source.path, contents: nil))
        let writer = try FileHandle(forWritingTo: source)
        var written = 0
        while written < Self.gibibyte {
            let count = min(Self.block.count, Self.gibibyte - written)
            writer.write(Data(Self.block[0..<count]))
            written += count
        }
        try writer.close()
        let stored = directory.url.appendingPathComponent("stored", isDirectory: true)
        try FileManager.default.createDirectory(at: stored, withIntermediateDirectories: true)
        origin.storeBodies(of: "/put", in: stored)
        origin.route("/put") { request in ScriptedResponse(status: 201, body: "stored \(request.bodyLength)") }
        let report = try await Self.runHelper(["upload", origin.url("/put").absoluteString, source.path])
        print("big transfer upload-1g: peak RSS \(report.peakRSSKiB) KiB, \(report.reports) progress reports")
        #expect(report.error == "" && report.status == 201)
        #expect(report.consistent)
        #expect(report.total == Int64(Self.gibibyte) && report.expected == Int64(Self.gibibyte))
        #expect(report.peakRSSKiB < Self.rssLimitKiB, "peak RSS \(report.peakRSSKiB) KiB")
        let request = try #require(origin.requests(to: "/put").first)
        #expect(request.method == "PUT" && request.bodyLength == Self.gibibyte)
        #expect(try Self.holdsCycle(try #require(request.bodyFile), count: Self.gibibyte))
        try await origin.shutdown()
    }
}
