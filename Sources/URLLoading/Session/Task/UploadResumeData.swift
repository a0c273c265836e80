import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Transport

/// What a resumable upload needs to go on in a new task: where the server
/// keeps it, how much it confirmed, and where the body is.
///
/// The format is JSON, versioned, and checked when read:
///
///     {"format": "urlloading-upload-resume-data", "version": 1,
///      "url": "https://…/files", "method": "PUT", "headers": [["Content-Type", "…"]],
///      "resumptionURL": "https://…/uploads/17", "interopVersion": 6,
///      "length": 8388608, "offset": 2796202,
///      "file": "/home/me/video.mov", "start": 0,
///      "fileSize": 8388608, "fileModified": 1795000000123456789, "fileInode": 1234}
///
/// The body is never in the blob: an upload from a file names the file
/// (an absolute path) with its size, modification time and inode, and is
/// refused when any changed (Apple's "the file must still exist and be
/// unmodified"); an upload from memory names a copy of its body that the
/// session wrote, private to the user, in its temporary folder (`spill`,
/// a bare name, never a path). Authorization, Cookie and
/// Proxy-Authorization fields are not kept; the resumption URL and the
/// upload's URL are kept without user information.
struct UploadResumeData: Codable, Equatable, Sendable {
    static let formatName = "urlloading-upload-resume-data"
    static let currentVersion = 1
    /// Beyond this a length read from a blob is not believed (1 PiB).
    static let largestLength: Int64 = 1 << 50

    var format = UploadResumeData.formatName
    var version = UploadResumeData.currentVersion
    var url: String
    var method: String
    var headers: [[String]]
    var resumptionURL: String
    var interopVersion: Int
    /// The body's length.
    var length: Int64
    /// The bytes the server confirmed it has (a `HEAD` asks again).
    var offset: Int64
    /// The caller's file, when the body came from one.
    var file: String?
    /// The session's copy of a body that was in memory: a bare name.
    var spill: String?
    /// Where in the file the body starts.
    var start: Int64
    var fileSize: Int64
    /// Nanoseconds since 1970.
    var fileModified: Int64
    var fileInode: UInt64

    /// A file's size, modification time and inode, as `stat` gives them;
    /// nil when it is not a regular file.
    struct Identity: Equatable {
        var size: Int64
        var modified: Int64
        var inode: UInt64

        init?(path: String, followLinks: Bool = true) {
            var info = stat()
            let status = followLinks ? stat(path, &info) : lstat(path, &info)
            guard status == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
            size = Int64(info.st_size)
            let (nanoseconds, overflow) = Int64(info.st_mtim.tv_sec).multipliedReportingOverflow(by: 1_000_000_000)
            modified = overflow ? Int64.max : nanoseconds &+ Int64(info.st_mtim.tv_nsec)
            inode = UInt64(info.st_ino)
        }
    }

    func encoded() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(self)) ?? Data()
    }

    /// Whether `name` is one the session gives its copies of bodies.
    static func isSpillName(_ name: String) -> Bool {
        name.hasPrefix("upload-") && name.hasSuffix(".body") && !name.contains("/") && name.utf8.count < 256
    }

    /// Reads and checks a blob; `directory` holds the session's copies of bodies.
    static func decode(_ data: Data, directory: URL) throws(SessionError) -> UploadResumeData {
        func refuse(_ why: String) -> SessionError {
            SessionError(.cannotDecodeResumeData, failingURL: nil, message: "upload resume data refused: \(why)")
        }
        guard let resume = try? JSONDecoder().decode(UploadResumeData.self, from: data) else {
            throw refuse("not an upload resume data blob (truncated or damaged)")
        }
        guard resume.format == formatName else { throw refuse("unknown format \(resume.format)") }
        guard resume.version == currentVersion else { throw refuse("version \(resume.version) is not \(currentVersion)") }
        guard let url = URL(string: resume.url), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw refuse("no http or https URL")
        }
        guard let resumption = URL(string: resume.resumptionURL), ResumableUpload.sameOrigin(resumption, url) else {
            throw refuse("the resumption URL is not on the upload's origin")
        }
        guard ResumableUpload.Version(rawValue: resume.interopVersion) != nil else {
            throw refuse("interop version \(resume.interopVersion) is not 3, 5 or 6")
        }
        guard FieldSyntax.isToken(resume.method) else { throw refuse("the method is not a token") }
        guard (0...largestLength).contains(resume.length), (0...resume.length).contains(resume.offset), resume.start >= 0 else {
            throw refuse("the length, offset or start is out of range")
        }
        guard resume.headers.allSatisfy({ $0.count == 2 }) else { throw refuse("malformed header list") }
        let path: String
        switch (resume.file, resume.spill) {
        case (let file?, nil):
            guard file.hasPrefix("/"), !file.utf8.contains(0), file.utf8.count < 4096 else { throw refuse("the body's file is not an absolute path") }
            path = file
        case (nil, let spill?):
            guard isSpillName(spill) else { throw refuse("the body's copy is not a plain name in the session's folder") }
            path = directory.appendingPathComponent(spill).path
        default:
            throw refuse("it names no body, or two")
        }
        guard let identity = Identity(path: path, followLinks: resume.file != nil) else { throw refuse("the body's file is gone") }
        guard identity == Identity(size: resume.fileSize, modified: resume.fileModified, inode: resume.fileInode) else {
            throw refuse("the body's file changed since the upload stopped")
        }
        let (end, overflow) = resume.start.addingReportingOverflow(resume.length)
        guard !overflow, end <= identity.size else { throw refuse("the body's file is shorter than the upload") }
        return resume
    }

    /// The upload's own request, as the caller made it (less its secrets).
    var request: URLRequest? {
        guard let url = URL(string: url) else { return nil }
        var request = URLRequest(url: url)
        request.httpMethod = method
        for field in headers { request.addValue(field[1], forHTTPHeaderField: field[0]) }
        return request
    }

    /// The body, as the transport sends it.
    func body(directory: URL) -> TransferRequest.Body {
        let path = file ?? directory.appendingPathComponent(spill ?? "").path
        return .file(path: path, offset: start, length: length)
    }

    /// Request fields worth keeping: not the secrets, not the draft's own.
    static func keptHeaders(_ request: URLRequest?) -> [[String]] {
        ResumeData.keptHeaders(
            request, dropping: ["content-length", "upload-draft-interop-version", "upload-complete", "upload-incomplete", "upload-offset"])
    }

    /// `url` without user information, as kept in a blob.
    static func withoutUserInfo(_ url: URL) -> String {
        guard url.user != nil || url.password != nil, var parts = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
            return url.absoluteString
        }
        parts.user = nil
        parts.password = nil
        return parts.string ?? url.absoluteString
    }
}

extension UploadResumeData.Identity {
    init(size: Int64, modified: Int64, inode: UInt64) {
        (self.size, self.modified, self.inode) = (size, modified, inode)
    }
}
