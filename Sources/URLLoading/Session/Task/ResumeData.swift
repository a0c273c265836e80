import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a download needs to go on where it stopped.
///
/// The format is JSON, versioned, and checked when read:
///
///     {"format": "urlloading-resume-data", "version": 1,
///      "url": "https://…", "headers": [["Accept", "*/*"], …],
///      "file": "download-<uuid>.tmp", "offset": 1048576,
///      "entityTag": "\"v1\"", "lastModified": "…", "expectedLength": 4194304}
///
/// `file` is a bare name inside the session's download directory (never a
/// path); `offset` is how many bytes of it are good. Authorization, Cookie
/// and Proxy-Authorization fields are not kept: the session adds them again.
/// A blob that is truncated, of another format or version, names a file
/// outside the directory, or whose file is missing or shorter than `offset`,
/// is refused with `SessionError.Code.cannotDecodeResumeData`.
struct ResumeData: Codable, Equatable, Sendable {
    static let formatName = "urlloading-resume-data"
    static let currentVersion = 1

    var format = ResumeData.formatName
    var version = ResumeData.currentVersion
    var url: String
    var headers: [[String]]
    var file: String
    var offset: Int64
    var entityTag: String?
    var lastModified: String?
    var expectedLength: Int64?

    func encoded() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(self)) ?? Data()
    }

    /// Reads and checks a blob against `directory`, where its file must be.
    static func decode(_ data: Data, directory: URL) throws(SessionError) -> ResumeData {
        func refuse(_ why: String) -> SessionError {
            SessionError(.cannotDecodeResumeData, failingURL: nil, message: "resume data refused: \(why)")
        }
        guard let resume = try? JSONDecoder().decode(ResumeData.self, from: data) else { throw refuse("not a resume data blob (truncated or damaged)") }
        guard resume.format == formatName else { throw refuse("unknown format \(resume.format)") }
        guard resume.version == currentVersion else { throw refuse("version \(resume.version) is not \(currentVersion)") }
        guard let url = URL(string: resume.url), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw refuse("no http or https URL")
        }
        guard !resume.file.isEmpty, !resume.file.contains("/"), !resume.file.hasPrefix("."), resume.file.utf8.count < 256 else {
            throw refuse("its file is not a plain name in the download directory")
        }
        guard resume.offset > 0, resume.entityTag != nil || resume.lastModified != nil else { throw refuse("no offset or validator to resume with") }
        let path = directory.appendingPathComponent(resume.file).path
        guard let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int64, size >= resume.offset else {
            throw refuse("the partial file is missing or shorter than the offset")
        }
        guard resume.headers.allSatisfy({ $0.count == 2 }) else { throw refuse("malformed header list") }
        return resume
    }

    /// The request that goes on from `offset`: Range, and If-Range so a
    /// changed resource comes whole.
    var request: URLRequest? {
        guard let url = URL(string: url) else { return nil }
        var request = URLRequest(url: url)
        for field in headers { request.addValue(field[1], forHTTPHeaderField: field[0]) }
        request.setValue("bytes=\(offset)-", forHTTPHeaderField: "Range")
        request.setValue(entityTag ?? lastModified, forHTTPHeaderField: "If-Range")
        return request
    }

    /// Request fields worth keeping: not the secrets, not a Range of ours.
    static func keptHeaders(_ request: URLRequest?) -> [[String]] {
        keptHeaders(request, dropping: ["range", "if-range"])
    }

    /// A request's fields as a blob keeps them, name and value, sorted by
    /// name: never Authorization, Proxy-Authorization or Cookie (a blob is
    /// not a place for secrets), nor the fields named in `dropped` (lower
    /// case), which the resumed request sets itself.
    static func keptHeaders(_ request: URLRequest?, dropping dropped: Set<String>) -> [[String]] {
        let secrets: Set<String> = ["authorization", "proxy-authorization", "cookie"]
        return (request?.allHTTPHeaderFields ?? [:]).filter { field in
            let name = field.key.lowercased()
            return !secrets.contains(name) && !dropped.contains(name)
        }.sorted { $0.key < $1.key }.map { [$0.key, $0.value] }
    }

    /// The validators of a response that allows resuming: a strong ETag or
    /// a Last-Modified, and no `Accept-Ranges: none`.
    static func validators(_ headers: [(name: String, value: String)]) -> (entityTag: String?, lastModified: String?)? {
        func value(_ name: String) -> String? { headers.last { HeaderFields.namesEqual($0.name, name) }?.value }
        if value("Accept-Ranges")?.lowercased() == "none" { return nil }
        let tag = value("ETag").flatMap { $0.hasPrefix("W/") ? nil : $0 }
        let modified = value("Last-Modified")
        guard tag != nil || modified != nil else { return nil }
        return (tag, modified)
    }
}

extension SessionTask.StateMachine {
    /// Whether a download that ended this way leaves resume data:
    /// the response allowed resuming, bytes arrived, and it failed
    /// in a way worth resuming (a timeout, a lost connection) or was
    /// cancelled by `cancel(byProducingResumeData:)`.
    static func leavesResumeData(failure: SessionError.Code, askedForResumeData: Bool, resumable: Bool, bytesOnDisk: Int64) -> Bool {
        guard resumable, bytesOnDisk > 0 else { return false }
        return failure == .timedOut || failure == .networkConnectionLost || (failure == .cancelled && askedForResumeData)
    }
}
