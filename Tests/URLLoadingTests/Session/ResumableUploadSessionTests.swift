import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// Resumable uploads end to end against Apple's server side (SwiftNIO's
/// `NIOResumableUpload`) on loopback, whose first connection is cut mid-body.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2)))) struct ResumableUploadSessionTests {
    static let size = 8 << 20

    static func body() -> Data {
        var bytes = [UInt8](repeating: 0, count: size)
        for index in bytes.indices { bytes[index] = UInt8(truncatingIfNeeded: index &* 2_654_435_761 >> 13) }
        return Data(bytes)
    }

    @Test("A cut upload goes on from the server's offset (interop 6 and 3): the file arrives whole, the wire carries it about once", arguments: [6, 3])
    func resumesAfterACut(version: Int) async throws {
        let server = try await TestResumableUploadServer.start(cutAfter: Self.size / 3)
        let configuration = SessionConfiguration.ephemeral
        configuration.resumableUploadVersion = version
        let session = Session(configuration: configuration)
        var request = URLRequest(url: try #require(URL(string: "\(server.origin)/files/one")))
        request.httpMethod = "PUT"
        let body = Self.body()
        let (data, response) = try await session.upload(for: request, from: body)
        #expect((response as? HTTPURLResponse)?.statusCode == 201)
        #expect(String(decoding: data, as: UTF8.self) == "stored \(Self.size)")
        #expect(server.upload("/files/one") == body, "the server's copy differs from the body")
        let requests = server.requests
        #expect(requests.first == "PUT /files/one" && requests.count == 3, "\(requests)")
        #expect(requests.dropFirst().first?.hasPrefix("HEAD /resumable_upload/") == true, "\(requests)")
        #expect(requests.last?.hasPrefix("PATCH /resumable_upload/") == true && requests.last?.contains(" offset ") == true, "\(requests)")
        #expect(Double(server.bodyBytes) <= Double(Self.size) * 1.05, "\(server.bodyBytes) body bytes for a \(Self.size)-byte file")
        session.finishTasksAndInvalidate()
        try await server.shutdown()
    }

    /// Notes the server's `104` (the task heard it before its delegate does).
    final class Listener: SessionTaskDelegate, Sendable {
        let named = CompletionLatch()

        func urlSession(_ session: Session, task: SessionTask, didReceiveInformationalResponse response: HTTPURLResponse) {
            if response.statusCode == 104 { named.open() }
        }
    }

    @Test(
        "An upload cancelled with resume data goes on in a new task (uploadTask(withResumeData:)): HEAD, then PATCH of the rest; the server's copy is the body, a changed file is refused",
        arguments: [true, false])
    func resumeData(fromFile: Bool) async throws {
        // The first connection stops being read at a third: the upload cannot finish before its cancel.
        let server = try await TestResumableUploadServer.start(holdAfter: Self.size / 3)
        let directory = TemporaryDirectory()
        let body = Self.body()
        let file = directory.url.appendingPathComponent("body.bin")
        try body.write(to: file)
        var request = URLRequest(url: try #require(URL(string: "\(server.origin)/files/two")))
        request.httpMethod = "PUT"
        // Longer than any stall of a loaded machine: the held connection's
        // idle timeout must not end it (and resume the upload elsewhere)
        // before the cancel.
        request.timeoutInterval = 3600
        let listener = Listener()
        let session = Session(configuration: .ephemeral, delegate: listener)
        let task = fromFile ? session.uploadTask(with: request, fromFile: file) : session.uploadTask(with: request, from: body)
        task.resume()
        #expect(await bounded(listener.named, "the 104"))
        let held = try #require(await eventually { server.heldBodyBytes != nil } ? server.heldBodyBytes : nil, "the server never held the upload")
        let blob = try #require(await task.cancelByProducingResumeData(), "no resume data")
        #expect(server.upload("/files/two") == nil, "the upload ended before its cancel")
        // The resumable handler hands what it read to the application lazily;
        // a HEAD before that is done gets an offset the server then outgrows.
        #expect(
            await eventually { server.received("/files/two") == held },
            "the server never processed what it read: \(server.received("/files/two")) of \(held) bytes, requests \(server.requests)")

        // Another session goes on with it, as an app started again would.
        let next = Session(configuration: .ephemeral)
        let (data, response) = try await next.upload(resumeFrom: blob)
        #expect((response as? HTTPURLResponse)?.statusCode == 201)
        #expect(String(decoding: data, as: UTF8.self) == "stored \(Self.size)")
        #expect(server.upload("/files/two") == body, "the server's copy differs from the body")
        let requests = server.requests
        #expect(requests.count == 3 && requests.first == "PUT /files/two", "\(requests)")
        #expect(requests.dropFirst().first?.hasPrefix("HEAD /resumable_upload/") == true, "\(requests)")
        #expect(requests.last?.hasPrefix("PATCH /resumable_upload/") == true, "\(requests)")
        #expect(Double(server.bodyBytes) <= Double(Self.size) * 1.05, "\(server.bodyBytes) body bytes for a \(Self.size)-byte body")

        if fromFile {
            // The same blob again, the file changed since: refused before any request.
            try Data("changed".utf8).write(to: file)
            do {
                _ = try await next.upload(resumeFrom: blob)
                Issue.record("a changed file was uploaded")
            } catch let error as URLError {
                #expect(error.sessionError?.code == .cannotDecodeResumeData && error.sessionError?.message.contains("changed") == true, "\(error)")
            }
            #expect(server.requests.count == 3)
        }
        session.finishTasksAndInvalidate()
        next.finishTasksAndInvalidate()
        try await server.shutdown()
        withExtendedLifetime(directory) {}
    }

    /// What a streamed upload's delegate gave and heard.
    final class StreamLog: Sendable {
        let body: Data
        let asked = Lock<[String]>([])
        let received = Lock<(status: Int?, data: Data, error: (any Error)?)>((nil, Data(), nil))
        let done = CompletionLatch()
        init(body: Data) { self.body = body }

        func whole() -> InputStream {
            asked.withLock { $0.append("whole") }
            return InputStream(data: body)
        }

        func heard(_ data: Data) { received.withLock { $0.data.append(data) } }

        func ended(_ task: SessionTask, _ error: (any Error)?) {
            received.withLock {
                $0.status = (task.response as? HTTPURLResponse)?.statusCode
                $0.error = error
            }
            done.open()
        }
    }

    /// Gives a streamed upload its whole body each time (`needNewBodyStream` only).
    final class WholeStreams: SessionDataDelegate {
        let log: StreamLog
        init(_ log: StreamLog) { self.log = log }
        func urlSession(_ session: Session, needNewBodyStreamForTask task: SessionTask) async -> InputStream? { log.whole() }
        func urlSession(_ session: Session, dataTask: SessionTask, didReceive data: Data) { log.heard(data) }
        func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) { log.ended(task, error) }
    }

    /// The same, and a stream from the offset an append goes on from (Apple's `needNewBodyStreamFrom`).
    final class OffsetStreams: SessionDataDelegate {
        let log: StreamLog
        init(_ log: StreamLog) { self.log = log }
        func urlSession(_ session: Session, needNewBodyStreamForTask task: SessionTask) async -> InputStream? { log.whole() }
        func urlSession(_ session: Session, needNewBodyStreamForTask task: SessionTask, from offset: Int64) async -> InputStream? {
            log.asked.withLock { $0.append("from \(offset)") }
            return InputStream(data: log.body.subdata(in: Int(offset)..<log.body.count))
        }
        func urlSession(_ session: Session, dataTask: SessionTask, didReceive data: Data) { log.heard(data) }
        func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) { log.ended(task, error) }
    }

    @Test(
        "A streamed upload of a known length goes on after a cut with a new stream: from the offset when the delegate gives one, else the whole with the offset skipped",
        arguments: [true, false])
    func streamedResumes(fromOffset: Bool) async throws {
        let server = try await TestResumableUploadServer.start(cutAfter: Self.size / 3)
        let body = Self.body()
        let giver = StreamLog(body: body)
        let delegate: any SessionDelegate = fromOffset ? OffsetStreams(giver) : WholeStreams(giver)
        let session = Session(configuration: .ephemeral, delegate: delegate)
        var request = URLRequest(url: try #require(URL(string: "\(server.origin)/files/streamed")))
        request.httpMethod = "PUT"
        request.setValue("\(Self.size)", forHTTPHeaderField: "Content-Length")
        session.uploadTask(withStreamedRequest: request).resume()
        #expect(await bounded(giver.done, "the upload's end"))
        let (status, data, error) = giver.received.withLock { ($0.status, $0.data, $0.error) }
        #expect(error == nil && status == 201, "\(String(describing: error))")
        #expect(String(decoding: data, as: UTF8.self) == "stored \(Self.size)")
        #expect(server.upload("/files/streamed") == body, "the server's copy differs from the body")
        let requests = server.requests
        #expect(requests.count == 3 && requests.last?.hasPrefix("PATCH /resumable_upload/") == true, "\(requests)")
        let offset = try #require(requests.last?.split(separator: " ").last.map(String.init))
        #expect(giver.asked.withLock { $0 } == (fromOffset ? ["whole", "from \(offset)"] : ["whole", "whole"]))
        #expect(Double(server.bodyBytes) <= Double(Self.size) * 1.05, "\(server.bodyBytes) body bytes for a \(Self.size)-byte body")
        session.finishTasksAndInvalidate()
        try await server.shutdown()
    }

    @Test("A server that does not speak the draft gets a plain upload; resumable uploads off send no field")
    func plainServer() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/plain", response: ScriptedResponse(status: 201, body: "ok"))
        var request = URLRequest(url: origin.url("/plain"))
        request.httpMethod = "POST"
        let session = Session(configuration: .ephemeral)
        let (data, response) = try await session.upload(for: request, from: Data("hello".utf8))
        #expect((response as? HTTPURLResponse)?.statusCode == 201 && data == Data("ok".utf8))
        let first = try #require(origin.requests(to: "/plain").first)
        #expect(first.header("Upload-Draft-Interop-Version") == "6" && first.header("Upload-Complete") == "?1")
        let configuration = SessionConfiguration.ephemeral
        configuration.resumableUploadVersion = nil
        let quiet = Session(configuration: configuration)
        _ = try await quiet.upload(for: request, from: Data("hello".utf8))
        #expect(origin.requests(to: "/plain").last?.header("Upload-Draft-Interop-Version") == nil)
        session.finishTasksAndInvalidate()
        quiet.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
