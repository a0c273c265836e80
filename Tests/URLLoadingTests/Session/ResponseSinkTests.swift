import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import URLLoading

/// The response sinks with chunks and answers only: no socket, no
/// transfer; and which sink each of the session's task-making calls routes
/// a response to (tasks made, never resumed).
@Suite struct ResponseSinkTests {
    static func take(_ sink: inout some ResponseSink, _ bytes: [UInt8], delegateListens: Bool = true) -> SinkStep {
        bytes.withUnsafeBytes { sink.take($0, delegateListens: delegateListens) }
    }

    static let response = HTTPURLResponse(url: URL(fileURLWithPath: "/"), statusCode: 200, httpVersion: "HTTP/1.1", headerFields: [:])

    @Test("Collecting: every chunk is kept and handed out at the end; a served body replaces it")
    func collecting() throws {
        var sink = CollectingSink.asyncCall { _, _, _ in }
        #expect(sink.usesCache && !sink.asksDelegate)
        sink.accept(length: 6, cacheCopyLimit: 0)
        #expect(Self.take(&sink, Array("abc".utf8)) == .taken)
        #expect(Self.take(&sink, Array("def".utf8), delegateListens: false) == .taken)
        let first = sink.close().body
        #expect(first == Data("abcdef".utf8))
        let second = sink.close().body
        #expect(second == Data(), "closing empties the sink")
        let response = try #require(Self.response)
        let served = sink.serve(response, Data("cached".utf8))
        #expect(served == .finish)
        let cached = sink.close().body
        #expect(cached == Data("cached".utf8))
    }

    @Test("Delegate data: chunks go to the delegate until 2 MiB wait for it, then the transfer pauses; below half it goes on")
    func delegateBackPressure() {
        var sink = DelegateDataSink()
        #expect(sink.asksDelegate && sink.usesCache)
        sink.accept(length: -1, cacheCopyLimit: 0)
        let chunk = [UInt8](repeating: 7, count: 64 * 1024)
        var delivered = 0
        while Self.take(&sink, chunk) == .deliver { delivered += chunk.count }
        #expect(delivered == DelegateDataSink.backlog)
        #expect(Self.take(&sink, chunk) == .refuse, "still full")
        let early = sink.delegateTook(DelegateDataSink.backlog / 4)
        #expect(early == false, "three quarters still wait")
        let half = sink.delegateTook(DelegateDataSink.backlog / 4)
        #expect(half == true, "half: go on")
        #expect(Self.take(&sink, chunk) == .deliver)
    }

    @Test("Delegate data without any delegate: nothing waits, nothing is refused, whatever the length")
    func delegateDataWithoutDelegate() {
        var sink = DelegateDataSink()
        sink.accept(length: -1, cacheCopyLimit: 0)
        let chunk = [UInt8](repeating: 1, count: 1 << 20)
        for _ in 0..<8 { #expect(Self.take(&sink, chunk, delegateListens: false) == .taken) }
        #expect(sink.queued == 0)
    }

    @Test("Delegate data keeps a copy for the cache up to its limit; one byte past it, nothing")
    func delegateCacheCopy() {
        var kept = DelegateDataSink()
        kept.accept(length: -1, cacheCopyLimit: 10)
        _ = Self.take(&kept, Array("01234".utf8))
        _ = Self.take(&kept, Array("56789".utf8))
        let keptBody = kept.close().body
        #expect(keptBody == Data("0123456789".utf8))

        var dropped = DelegateDataSink()
        dropped.accept(length: -1, cacheCopyLimit: 10)
        _ = Self.take(&dropped, Array("01234".utf8))
        _ = Self.take(&dropped, Array("567890".utf8))
        _ = Self.take(&dropped, Array("1".utf8))
        let droppedBody = dropped.close().body
        #expect(droppedBody == nil, "a body past the limit is not kept, even in part")

        var declaredTooLong = DelegateDataSink()
        declaredTooLong.accept(length: 11, cacheCopyLimit: 10)
        _ = Self.take(&declaredTooLong, Array("0".utf8))
        let declaredTooLongBody = declaredTooLong.close().body
        #expect(declaredTooLongBody == nil)

        var notStorable = DelegateDataSink()
        notStorable.accept(length: 1, cacheCopyLimit: 0)
        _ = Self.take(&notStorable, Array("0".utf8))
        let notStorableBody = notStorable.close().body
        #expect(notStorableBody == nil)
    }

    @Test("Delegate data split into multipart parts: part heads and bytes as events; a broken part head fails")
    func delegateParts() {
        var sink = DelegateDataSink()
        sink.accept(length: -1, cacheCopyLimit: 100)
        sink.splitParts(boundary: "b")
        let body = Array("--b\r\nContent-Type: text/plain\r\n\r\none\r\n--b\r\nContent-Type: text/plain\r\n\r\ntwo".utf8)
        guard case .parts(let events) = Self.take(&sink, body) else {
            Issue.record("a multipart body gives part events")
            return
        }
        #expect(events.first == .part([HeaderFields.Field("Content-Type", "text/plain")]))
        #expect(events.contains(.data(Data("one".utf8))))
        let contents = sink.close()
        #expect(contents.body == nil, "parts are never kept for the cache")
        #expect(contents.tail.contains(.data(Data("two".utf8))), "the last part's bytes come at the end")

        var broken = DelegateDataSink()
        broken.splitParts(boundary: "b")
        let step = Self.take(&broken, Array("--b\r\nno colon here\r\n\r\n".utf8))
        guard case .malformed = step else {
            Issue.record("a part head without a colon is malformed, got \(step)")
            return
        }
    }

    @Test("Download: nothing is written before the file is open; then totals count from the resumed offset, and a lying length never overflows")
    func download() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sink-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("f")
        #expect(FileManager.default.createFile(atPath: path.path, contents: nil))
        let handle = try FileHandle(forWritingTo: path)
        defer { try? handle.close() }

        var sink = DownloadSink()
        #expect(!sink.usesCache && !sink.asksDelegate)
        sink.accept(length: Int64.max, cacheCopyLimit: 0)
        #expect(Self.take(&sink, [1, 2, 3]) == .taken, "no file yet")
        let tells = sink.attach(DownloadFile(handle: handle, url: path, offset: 100))
        #expect(tells, "a delegate download tells where it resumes")
        #expect(Self.take(&sink, [1, 2, 3]) == .write(handle, total: 103, expected: -1, report: true))
        #expect(Self.take(&sink, [4], delegateListens: false) == .write(handle, total: 104, expected: -1, report: false))
        let closed = sink.close().file?.url
        #expect(closed == path)

        var handled = DownloadSink(handler: { _, _, _ in })
        handled.accept(length: 10, cacheCopyLimit: 0)
        let handlerTells = handled.attach(DownloadFile(handle: handle, url: path, offset: 5))
        #expect(handlerTells == false)
        #expect(Self.take(&handled, [1]) == .write(handle, total: 6, expected: 15, report: false), "a handler hears nothing per chunk")
        let response = try #require(Self.response)
        let handledServe = handled.serve(response, Data())
        #expect(handledServe == .finish)
        var delegateDownload = DownloadSink()
        let delegateServe = delegateDownload.serve(response, Data())
        #expect(delegateServe == .askDelegate)
    }

    @Test("Byte stream: chunks go to the reader's buffer until it holds its limit, then the transfer pauses")
    func stream() {
        let buffer = ByteStreamBuffer()
        var sink = StreamSink(buffer: buffer)
        #expect(!sink.usesCache && !sink.asksDelegate)
        let chunk = [UInt8](repeating: 0, count: 256 * 1024)
        var taken = 0
        while Self.take(&sink, chunk) == .taken { taken += chunk.count }
        #expect(taken >= ByteStreamBuffer.limit)
        #expect(taken < ByteStreamBuffer.limit + chunk.count)
    }

    @Test("Each way of making a task routes its response to its own sink")
    func routing() throws {
        let session = Session(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let url = try #require(URL(string: "http://127.0.0.1:9/"))
        let request = URLRequest(url: url)
        func sink(_ task: SessionTask) -> any ResponseSink { task.locked.withLock { $0.sink } }
        #expect(sink(session.dataTask(with: request)) is DelegateDataSink)
        #expect(sink(session.dataTask(with: request) { _, _, _ in }) is CollectingSink)
        #expect(sink(session.uploadTask(with: request, from: Data())) is DelegateDataSink)
        #expect(sink(session.uploadTask(with: request, from: Data()) { _, _, _ in }) is CollectingSink)
        #expect(sink(session.uploadTask(withStreamedRequest: request)) is DelegateDataSink)
        #expect((sink(session.downloadTask(with: request)) as? DownloadSink)?.handler == nil)
        #expect((sink(session.downloadTask(with: request) { _, _, _ in }) as? DownloadSink)?.handler != nil)
        #expect(sink(session.streamTask(with: request, buffer: ByteStreamBuffer())) is StreamSink)
        #expect(sink(session.rawTask(.data, with: request, body: nil) { _, _, _ in }) is CollectingSink)
        #expect((sink(session.downloadTask(withResumeData: Data("junk".utf8))) as? DownloadSink)?.handler == nil)
    }
}
