import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// Resume data through real downloads: cancel and go on with
/// Range/If-Range, a changed resource starting over, a lost connection's
/// error carrying resume data, and forged or truncated blobs refused.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct ResumeDataTests {
    static let body = (0..<300_000).map { UInt8($0 % 253) }

    /// The resource's current ETag, changed by a test.
    final class Tag: Sendable {
        private let value: Lock<String>
        init(_ value: String) { self.value = Lock(value) }
        var current: String {
            get { value.withLock { $0 } }
            set { value.withLock { $0 = newValue } }
        }
    }

    /// A resource with an ETag that honours Range with a matching If-Range;
    /// the first full answer holds the rest after 100,000 bytes at a gate
    /// nobody opens (the test's cancel ends it, however long a loaded machine
    /// takes to get there), or cuts the connection there.
    static func route(_ origin: TestOrigin, etag: Tag, cut: Bool = false) {
        origin.route("/big") { request in
            let tag = etag.current
            if let start = resumeStart(request, entityTag: tag, length: body.count) {
                return ScriptedResponse(
                    status: 206,
                    headers: [
                        HeaderField("ETag", tag), HeaderField("Content-Range", "bytes \(start)-\(body.count - 1)/\(body.count)"),
                    ], body: Array(body[start...]))
            }
            var response = ScriptedResponse(
                status: 200, headers: [HeaderField("ETag", tag), HeaderField("Accept-Ranges", "bytes")],
                parts: [.bytes(Array(body[..<100_000])), cut ? .closeConnection : .waitFor(OriginGate()), .bytes(Array(body[100_000...]))],
                framing: .contentLength)
            response.headers.append(HeaderField("Content-Length", String(body.count)))
            response.framing = .declaredLength(body.count)
            return response
        }
    }

    /// The offset a resuming request asks for (`Range: bytes=N-` with an
    /// If-Range naming `entityTag`), or nil for a full answer.
    static func resumeStart(_ request: RecordedRequest, entityTag: String, length: Int) -> Int? {
        guard let range = request.header("Range"), range.hasPrefix("bytes="), range.hasSuffix("-"),
            request.header("If-Range") == entityTag, let start = Int(range.dropFirst(6).dropLast()), start < length
        else { return nil }
        return start
    }

    static func waitForBytes(_ task: SessionTask, _ count: Int64) async {
        #expect(await eventually(within: .seconds(30)) { task.countOfBytesReceived >= count }, "fewer than \(count) bytes arrived")
    }

    @Test("Cancel(byProducingResumeData:), then a task from the data sends Range and If-Range and appends the rest")
    func cancelAndResume() async throws {
        let origin = try await TestOrigin.start()
        let etag = Tag("\"v1\"")
        Self.route(origin, etag: etag)
        let first = RecordingDelegate()
        let session = Session(configuration: .ephemeral, delegate: first)
        let task = session.downloadTask(with: URLRequest(url: origin.url("/big")))
        task.resume()
        await Self.waitForBytes(task, 100_000)
        let resumeData = try #require(await task.cancelByProducingResumeData())
        await first.waitForCompletion()
        let second = RecordingDelegate()
        let other = Session(configuration: .ephemeral, delegate: second)
        other.downloadTask(withResumeData: resumeData).resume()
        await second.waitForCompletion()
        #expect(second.events.first == "resumed 100000 of 300000")
        #expect(second.downloaded == Data(Self.body))
        let resumedRequest = try #require(origin.requests.last)
        #expect(resumedRequest.header("Range") == "bytes=100000-" && resumedRequest.header("If-Range") == "\"v1\"")
        // The same resume data again: its file is gone once the download finished.
        let third = RecordingDelegate()
        let again = Session(configuration: .ephemeral, delegate: third)
        again.downloadTask(withResumeData: resumeData).resume()
        await third.waitForCompletion()
        #expect(third.events.last?.contains("cannot decode resume data") == true)
        for s in [session, other, again] { s.finishTasksAndInvalidate() }
        try await origin.shutdown()
    }

    @Test("A changed resource (If-Range fails) starts the file over at offset 0")
    func changedResourceStartsOver() async throws {
        let origin = try await TestOrigin.start()
        let etag = Tag("\"v1\"")
        Self.route(origin, etag: etag)
        let session = Session(configuration: .ephemeral, delegate: RecordingDelegate())
        let task = session.downloadTask(with: URLRequest(url: origin.url("/big")))
        task.resume()
        await Self.waitForBytes(task, 100_000)
        let resumeData = try #require(await task.cancelByProducingResumeData())
        etag.current = "\"v2\""
        origin.route("/big", response: ScriptedResponse(headers: [HeaderField("ETag", "\"v2\"")], body: "new version"))
        let delegate = RecordingDelegate()
        let other = Session(configuration: .ephemeral, delegate: delegate)
        other.downloadTask(withResumeData: resumeData).resume()
        await delegate.waitForCompletion()
        #expect(delegate.events.first == "resumed 0 of 11")
        #expect(delegate.downloaded == Data("new version".utf8))
        session.finishTasksAndInvalidate()
        other.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A download that loses its connection after bytes arrived fails with resume data in its error")
    func lostConnectionCarriesResumeData() async throws {
        let origin = try await TestOrigin.start()
        let etag = Tag("\"v1\"")
        Self.route(origin, etag: etag, cut: true)
        let session = Session(configuration: .ephemeral)
        let error = await #expect(throws: URLError.self) {
            _ = try await session.download(for: URLRequest(url: origin.url("/big")))
        }
        #expect(error?.code == .networkConnectionLost)
        let resumeData = try #require(error?.downloadTaskResumeData)
        #expect(!"\(error!)".contains("urlloading-resume-data"))
        Self.route(origin, etag: etag)
        let (_, contents) = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(URL, Data), any Error>) in
            session.downloadTask(withResumeData: resumeData) { location, _, error in
                if let error { continuation.resume(throwing: error); return }
                continuation.resume(returning: (location!, (try? Data(contentsOf: location!)) ?? Data()))
            }.resume()
        }
        #expect(contents == Data(Self.body))
        #expect(origin.requests.last?.header("Range") == "bytes=100000-")
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    /// A 4 MB resource of the big-transfer block, honouring Range with
    /// If-Range; the full answer stops after `offset` bytes (the server drops
    /// the connection, or holds it at a gate nobody opens until the client
    /// cancels).
    static func cutRoute(_ origin: TestOrigin, offset: Int, drop: Bool) -> [UInt8] {
        let total = 4_000_037
        let block = TestOrigin.pattern(offset: 0, count: 1_000_003)
        origin.route("/cut") { request in
            let headers = [HeaderField("ETag", "\"c1\""), HeaderField("Accept-Ranges", "bytes")]
            if let start = resumeStart(request, entityTag: "\"c1\"", length: total) {
                return ScriptedResponse(
                    status: 206, headers: headers + [HeaderField("Content-Range", "bytes \(start)-\(total - 1)/\(total)")],
                    parts: [.cycle(of: block, offset: start, count: total - start)], framing: .contentLength)
            }
            return ScriptedResponse(
                status: 200, headers: headers,
                parts: [.cycle(of: block, offset: 0, count: offset), drop ? .closeConnection : .waitFor(OriginGate())],
                framing: .declaredLength(total))
        }
        var whole: [UInt8] = []
        while whole.count < total { whole += block }
        return Array(whole[..<total])
    }

    @Test(
        "Resumed after the server dropped the connection, or after a cancel, at several offsets: the file is the original, byte for byte",
        arguments: [(1, true), (65_536, true), (1_000_003, true), (3_999_999, true), (1, false), (2_500_000, false)])
    func resumeAtOffsets(offset: Int, drop: Bool) async throws {
        let origin = try await TestOrigin.start()
        let original = Self.cutRoute(origin, offset: offset, drop: drop)
        let session = Session(configuration: .ephemeral)
        let resumeData: Data
        if drop {
            let error = await #expect(throws: URLError.self) {
                _ = try await session.download(for: URLRequest(url: origin.url("/cut")))
            }
            #expect(error?.code == .networkConnectionLost)
            resumeData = try #require(error?.downloadTaskResumeData)
        } else {
            let task = session.downloadTask(with: URLRequest(url: origin.url("/cut")))
            task.resume()
            await Self.waitForBytes(task, Int64(offset))
            resumeData = try #require(await task.cancelByProducingResumeData())
        }
        let contents = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Data, any Error>) in
            session.downloadTask(withResumeData: resumeData) { location, _, error in
                if let error { continuation.resume(throwing: error); return }
                continuation.resume(returning: location.flatMap { try? Data(contentsOf: $0) } ?? Data())
            }.resume()
        }
        #expect(contents.count == original.count)
        // Byte equality (memcmp): hashing megabytes in a debug build held a
        // cooperative thread for seconds, and the suite's other tests with it.
        #expect(contents == Data(original))
        #expect(origin.requests(to: "/cut").last?.header("Range") == "bytes=\(offset)-")
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Truncated, forged and foreign resume data are refused with a clear error")
    func badResumeData() async throws {
        // Made as the library makes it (0700): a folder this test made with
        // FileManager's 0755 would be refused to every download test after it.
        let directory = try DownloadFiles.privateDirectory()
        let partial = directory.appendingPathComponent("download-test-\(UUID().uuidString).tmp")
        try Data(repeating: 1, count: 10).write(to: partial)
        defer { try? FileManager.default.removeItem(at: partial) }
        let good = ResumeData(url: "https://example.test/f", headers: [], file: partial.lastPathComponent, offset: 10, entityTag: "\"x\"")
        #expect(throws: Never.self) { try ResumeData.decode(good.encoded(), directory: directory) }
        var forged = good
        forged.file = "../../../etc/passwd"
        var newer = good
        newer.version = 2
        var longer = good
        longer.offset = 11
        for (blob, why) in [(good.encoded().prefix(20), "truncated"), (forged.encoded(), "plain name"), (newer.encoded(), "version 2"), (longer.encoded(), "shorter")] {
            #expect {
                _ = try ResumeData.decode(Data(blob), directory: directory)
            } throws: { error in
                (error as? SessionError)?.code == .cannotDecodeResumeData && "\(error)".contains(why)
            }
        }
        let session = Session(configuration: .ephemeral)
        await #expect {
            _ = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                session.downloadTask(withResumeData: Data(forged.encoded())) { _, _, error in
                    if let error { continuation.resume(throwing: error) } else { continuation.resume() }
                }.resume()
            }
        } throws: { ($0 as? URLError)?.sessionError?.code == .cannotDecodeResumeData }
        session.finishTasksAndInvalidate()
    }
}
