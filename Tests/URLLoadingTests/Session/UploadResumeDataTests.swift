import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport
@testable import URLLoading

/// Upload resume data as a format: what a blob keeps, and every blob that
/// is damaged, forged or stale refused with its reason.
@Suite struct UploadResumeDataTests {
    /// A valid blob for the file at `path`, changed by `change`.
    static func blob(file path: String, _ change: (inout UploadResumeData) -> Void = { _ in }) throws -> Data {
        let identity = try #require(UploadResumeData.Identity(path: path))
        var resume = UploadResumeData(
            url: "https://example.com/files/a", method: "PUT", headers: [["Content-Type", "video/mp4"]],
            resumptionURL: "https://example.com/uploads/1", interopVersion: 6, length: identity.size, offset: 10, file: path, spill: nil,
            start: 0, fileSize: identity.size, fileModified: identity.modified, fileInode: identity.inode)
        change(&resume)
        return resume.encoded()
    }

    @Test("A blob keeps the upload's fields but not its secrets, and its URLs without user information")
    func keptFields() throws {
        var request = URLRequest(url: try #require(URL(string: "https://example.com/files")))
        for (name, value) in [
            ("Authorization", "Bearer t0ken"), ("Cookie", "s=1"), ("Proxy-Authorization", "Basic eA=="), ("Upload-Complete", "?1"),
            ("Upload-Draft-Interop-Version", "6"), ("Content-Length", "9"), ("Content-Type", "video/mp4"), ("X-Trace", "7"),
        ] {
            request.setValue(value, forHTTPHeaderField: name)
        }
        #expect(UploadResumeData.keptHeaders(request) == [["Content-Type", "video/mp4"], ["X-Trace", "7"]])
        let url = try #require(URL(string: "https://me:pa55@example.com/uploads/1?part=2"))
        #expect(UploadResumeData.withoutUserInfo(url) == "https://example.com/uploads/1?part=2")
    }

    @Test("Damaged, forged or stale blobs are refused with cannotDecodeResumeData and a reason")
    func refusals() throws {
        let directory = TemporaryDirectory()
        let path = directory.path("body.bin")
        try Data(repeating: 7, count: 100).write(to: URL(fileURLWithPath: path))
        #expect(try UploadResumeData.decode(Self.blob(file: path), directory: directory.url).offset == 10)
        let cases: [(String, Data)] = [
            ("truncated", try Self.blob(file: path).prefix(40)),
            ("unknown format", try Self.blob(file: path) { $0.format = "urlloading-resume-data" }),
            ("version 2", try Self.blob(file: path) { $0.version = 2 }),
            ("no http or https", try Self.blob(file: path) { $0.url = "file:///etc/passwd" }),
            ("not on the upload's origin", try Self.blob(file: path) { $0.resumptionURL = "https://evil.example/uploads/1" }),
            ("interop version 4", try Self.blob(file: path) { $0.interopVersion = 4 }),
            ("not a token", try Self.blob(file: path) { $0.method = "PUT /x" }),
            ("out of range", try Self.blob(file: path) { $0.offset = 101 }),
            ("out of range", try Self.blob(file: path) { $0.length = -1 }),
            ("out of range", try Self.blob(file: path) { $0.length = Int64.max }),
            ("malformed header list", try Self.blob(file: path) { $0.headers = [["Lonely"]] }),
            ("not an absolute path", try Self.blob(file: path) { $0.file = "body.bin" }),
            ("names no body, or two", try Self.blob(file: path) { $0.spill = "upload-1.body" }),
            ("names no body, or two", try Self.blob(file: path) { $0.file = nil }),
            ("not a plain name", try Self.blob(file: path) { ($0.file, $0.spill) = (nil, "../upload-1.body") }),
            ("is gone", try Self.blob(file: path) { ($0.file, $0.spill) = (nil, "upload-missing.body") }),
            ("is gone", try Self.blob(file: path) { $0.file = directory.path("missing.bin") }),
            ("changed since", try Self.blob(file: path) { $0.fileModified -= 1 }),
            ("changed since", try Self.blob(file: path) { $0.fileSize = 99 }),
            ("shorter than the upload", try Self.blob(file: path) { $0.start = 1 }),
            ("shorter than the upload", try Self.blob(file: path) { $0.start = Int64.max }),
        ]
        for (reason, blob) in cases {
            do {
                _ = try UploadResumeData.decode(blob, directory: directory.url)
                Issue.record("accepted: \(reason)")
            } catch {
                #expect(error.code == .cannotDecodeResumeData && error.message.contains(reason), "\(reason): \(error.message)")
            }
        }
        // A symbolic link in the session's folder is not its copy of a body.
        symlink(path, directory.path("upload-link.body"))
        let linked = try Self.blob(file: path) { ($0.file, $0.spill) = (nil, "upload-link.body") }
        #expect(throws: SessionError.self) { try UploadResumeData.decode(linked, directory: directory.url) }
    }
}
