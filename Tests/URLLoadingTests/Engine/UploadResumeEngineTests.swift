import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport
import Transport
@testable import URLLoading

/// Upload resume data in the engine, its transfers played by a script: a
/// cancelled or failed resumable upload hands out a blob, and a task made
/// from it asks the resumption URL for the offset and sends the rest.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct UploadResumeEngineTests {
    static let body = ResumableUploadEngineTests.body
    static let lost = ResumableUploadEngineTests.lost

    /// An upload of `body` from memory, with a secret in its fields, resumed at once.
    static func upload(_ harness: EngineHarness) -> (SessionTask, Outcome) {
        var request = URLRequest(url: EngineHarness.url("/files"))
        request.httpMethod = "PUT"
        request.setValue("Bearer upload-secret", forHTTPHeaderField: "Authorization")
        request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        let outcome = Outcome()
        let task = harness.session.uploadTask(with: request, from: body) { data, response, error in outcome.set(data, response, error) }
        task.resume()
        return (task, outcome)
    }

    @Test("Cancelled after the 104, an upload gives resume data without its secret; a task made from it sends HEAD, then PATCH from the server's offset, and removes its copy of the body")
    func cancelAndResume() async throws {
        let harness = EngineHarness()
        let (task, outcome) = Self.upload(harness)
        let first = try #require(await harness.executor.transfer(0))
        first.interim(104, [("Location", "/uploads/5")])
        first.sent(400, of: 1000)
        let blob = try #require(await task.cancelByProducingResumeData(), "no resume data after a 104")
        #expect(await outcome.wait())
        #expect(outcome.code == .cancelled)
        #expect(!String(decoding: blob, as: UTF8.self).contains("upload-secret"), "the blob holds the Authorization value")
        let resume = try UploadResumeData.decode(blob, directory: DownloadFiles.directory)
        #expect(resume.url == "http://engine.invalid/files" && resume.method == "PUT")
        #expect(resume.resumptionURL == "http://engine.invalid/uploads/5" && resume.interopVersion == 6)
        #expect(resume.length == 1000 && resume.offset == 0 && resume.file == nil)
        #expect(resume.headers == [["Content-Type", "text/plain"]])
        let spill = try #require(resume.spill)
        let copy = DownloadFiles.directory.appendingPathComponent(spill).path
        #expect(FileManager.default.contents(atPath: copy) == Self.body)
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: copy)[.posixPermissions] as? Int)
        #expect(mode & 0o077 == 0, "the body's copy is readable by others: \(String(mode, radix: 8))")

        let again = Outcome()
        let resumed = harness.session.uploadTask(withResumeData: blob) { data, response, error in again.set(data, response, error) }
        resumed.resume()
        let offset = try #require(await harness.executor.transfer(1))
        #expect(offset.request.method == "HEAD" && offset.request.url == "http://engine.invalid/uploads/5")
        #expect(offset.field("Upload-Draft-Interop-Version") == "6")
        await ResumableUploadEngineTests.respond(offset, 204, [("Upload-Offset", "300")])
        let append = try #require(await harness.executor.transfer(2))
        #expect(append.request.method == "PATCH" && append.field("Upload-Offset") == "300")
        #expect(append.field("Content-Type") == "application/partial-upload")
        guard case .file(let path, let start, let length) = append.request.body else {
            Issue.record("the PATCH's body is not the rest of the copy")
            return
        }
        #expect(path == copy && start == 300 && length == 700)
        append.sent(700, of: 700)
        await ResumableUploadEngineTests.respond(append, 201, body: "ok")
        #expect(await again.wait())
        #expect(again.error == nil && again.response?.statusCode == 201 && again.body == "ok")
        #expect(resumed.countOfBytesSent == 1000 && resumed.countOfBytesExpectedToSend == 1000)
        #expect(!FileManager.default.fileExists(atPath: copy), "the body's copy outlived the upload")
    }

    @Test("An upload whose own resumptions run out fails with upload resume data (Apple's uploadTaskResumeData), not a download's")
    func failureCarriesResumeData() async throws {
        let harness = EngineHarness()
        let (_, outcome) = Self.upload(harness)
        let first = try #require(await harness.executor.transfer(0))
        first.interim(104, [("Location", "/uploads/6")])
        first.fail(Self.lost)
        for index in 1...5 {
            let offset = try #require(await harness.executor.transfer(index))
            #expect(offset.request.method == "HEAD")
            offset.fail(Self.lost)
        }
        #expect(await outcome.wait())
        let error = try #require(outcome.error)
        #expect(error.code == .networkConnectionLost && error.downloadTaskResumeData == nil)
        let blob = try #require(error.uploadTaskResumeData, "the failure carries no upload resume data")
        let resume = try UploadResumeData.decode(blob, directory: DownloadFiles.directory)
        #expect(resume.resumptionURL == "http://engine.invalid/uploads/6")
        DownloadFiles.remove(try #require(resume.spill))
    }

    @Test("Before a 104, or for a data task, cancel(byProducingResumeData:) gives nil; damaged resume data fails its task before any transfer")
    func noResumeData() async throws {
        let harness = EngineHarness()
        let (task, outcome) = Self.upload(harness)
        _ = try #require(await harness.executor.transfer(0))
        #expect(await task.cancelByProducingResumeData() == nil)
        #expect(await outcome.wait())

        let (data, dataOutcome) = harness.start("/plain")
        _ = try #require(await harness.executor.transfer(1))
        #expect(await data.cancelByProducingResumeData() == nil)
        #expect(await dataOutcome.wait())

        for blob in [Data("{\"format\":".utf8), Data()] {
            let refused = Outcome()
            harness.session.uploadTask(withResumeData: blob) { data, response, error in refused.set(data, response, error) }.resume()
            #expect(await refused.wait())
            #expect(refused.error?.sessionError?.code == .cannotDecodeResumeData)
        }
        #expect(harness.executor.started.count == 2, "a refused blob started a transfer")
    }
}
