import Foundation

/// An upload that survives a dropped connection without sending its body
/// again, as Apple's sessions do it since iOS 17: resumable uploads
/// (draft-ietf-httpbis-resumable-upload) in the interop versions Apple
/// ships — 3 (iOS 17), 5 (iOS 18.0) and 6 (iOS 18.1).
///
/// The upload announces the feature; a `104 Upload Resumption Supported`
/// with a `Location` on the request's origin names the upload's
/// resumption URL. When the body's exchange fails after that, a `HEAD` of
/// the URL asks how many bytes the server has (`Upload-Offset` in its
/// `204`), and a `PATCH` from there sends the rest. An upload the server no
/// longer knows (`404`, `410`, or a `409` whose next `HEAD` finds nothing)
/// is sent whole once more, as a new resumable upload.
///
/// A pure machine: the task tells it what came back and carries out what
/// it answers; the deadline and the request's own body stay the task's.
struct ResumableUpload: Equatable {
    /// The draft's interop versions this side speaks.
    enum Version: Int, Sendable, Equatable, CaseIterable {
        case v3 = 3
        case v5 = 5
        case v6 = 6
    }

    /// The request the task sends next.
    enum Request: Equatable {
        /// The upload itself, the whole body (the first try, or a new
        /// upload after the server lost the old one).
        case upload
        /// `HEAD` of the resumption URL: how much the server has.
        case offset(URL)
        /// `PATCH` of the resumption URL with the body from `offset` on.
        case append(URL, offset: Int64)
    }

    /// What the task does after an event.
    enum Step: Equatable {
        /// Sends this request, with `fields(for:)` added.
        case send(Request)
        /// The response that came is the task's answer.
        case answer
        /// The upload cannot go on: the task fails with the failure it
        /// had, or, for a server answer that breaks the protocol, with
        /// `badServerResponse` and this reason.
        case fail(reason: String?)
    }

    let version: Version
    /// The body's length.
    let length: Int64
    /// How many times the upload may ask for the offset after failures.
    let maximumResumptions: Int
    /// Where the upload continues, once a `104` named it.
    private(set) var resumptionURL: URL?
    /// The request in flight.
    private(set) var current: Request = .upload
    /// The bytes the server confirmed it has.
    private(set) var confirmed: Int64 = 0
    private(set) var resumptions = 0
    /// The body was sent whole a second time (the server lost the first).
    private(set) var restarted = false
    /// A `409` answered the append from this offset: the next `HEAD` that
    /// finds nothing restarts, and one that names the same offset again
    /// ends the upload (the server refuses what it asks for: sending the
    /// rest again and again would put the body on the wire many times).
    private var conflictedAt: Int64?

    init(version: Version, length: Int64, maximumResumptions: Int = 5) {
        self.version = version
        self.length = length
        self.maximumResumptions = maximumResumptions
    }

    /// An upload that stopped earlier (its resume data): the first request
    /// asks `url` for the server's offset.
    init(version: Version, length: Int64, resumingAt url: URL, confirmed: Int64, maximumResumptions: Int = 5) {
        self.init(version: version, length: length, maximumResumptions: maximumResumptions)
        resumptionURL = url
        current = .offset(url)
        self.confirmed = confirmed
    }

    /// The fields the draft asks of `request` (the caller's own stay).
    func fields(for request: Request) -> [(name: String, value: String)] {
        var fields = [(name: "Upload-Draft-Interop-Version", value: "\(version.rawValue)")]
        switch request {
        case .upload, .append:
            fields.append(version == .v3 ? (name: "Upload-Incomplete", value: "?0") : (name: "Upload-Complete", value: "?1"))
            if case .append(_, let offset) = request {
                fields.append((name: "Upload-Offset", value: "\(offset)"))
                if version == .v6 { fields.append((name: "Content-Type", value: "application/partial-upload")) }
            }
        case .offset:
            break
        }
        return fields
    }

    /// An informational response to the upload itself. Returns a
    /// `Location` that was not taken (on another origin, or unreadable),
    /// for the task's log.
    mutating func informational(status: Int, location: String?, requestURL: URL) -> String? {
        guard status == 104, current == .upload, let location else { return nil }
        guard let url = URL(string: location, relativeTo: requestURL)?.absoluteURL, Self.sameOrigin(url, requestURL) else {
            return location
        }
        resumptionURL = url
        return nil
    }

    /// The exchange in flight ended without a response (a reset, a
    /// timeout): the upload goes on from what the server has, if it can.
    mutating func failed() -> Step {
        guard let resumptionURL, resumptions < maximumResumptions else { return .fail(reason: nil) }
        resumptions += 1
        current = .offset(resumptionURL)
        return .send(current)
    }

    /// The final response to the request in flight, with its status and
    /// fields.
    mutating func response(status: Int, fields: [(name: String, value: String)]) -> Step {
        switch current {
        case .upload, .append:
            if status == 409, case .append(_, let offset) = current, let resumptionURL {
                // The server's offset is not ours: ask again (on some servers a 409 ends the upload).
                conflictedAt = offset
                return askAgain(resumptionURL)
            }
            if (status == 404 || status == 410), case .append = current { return restart() }
            return .answer
        case .offset(let url):
            if status == 404 || status == 410 || (status == 409 && conflictedAt != nil) { return restart() }
            guard (200...299).contains(status) else { return .fail(reason: nil) }
            guard let offset = Self.offset(in: fields) else {
                return .fail(reason: "the resumable upload's offset answer has no readable Upload-Offset")
            }
            guard offset <= length, offset >= confirmed else {
                return .fail(reason: "the server claims \(offset) bytes of a \(length)-byte upload, having confirmed \(confirmed)")
            }
            if let refused = conflictedAt, offset == refused {
                return .fail(reason: "the server answered 409 to the upload's append at offset \(offset), then asked for that offset again")
            }
            confirmed = offset
            conflictedAt = nil
            if offset == length, Self.complete(in: fields, version: version) == true {
                // The upload ended there, but its answer was lost with the connection.
                return .fail(reason: nil)
            }
            current = .append(url, offset: offset)
            return .send(current)
        }
    }

    private mutating func askAgain(_ url: URL) -> Step {
        guard resumptions < maximumResumptions else { return .fail(reason: nil) }
        resumptions += 1
        current = .offset(url)
        return .send(current)
    }

    /// The whole body once more, as a new resumable upload.
    private mutating func restart() -> Step {
        guard !restarted else { return .fail(reason: nil) }
        restarted = true
        conflictedAt = nil
        resumptionURL = nil
        confirmed = 0
        current = .upload
        return .send(.upload)
    }

    // MARK: Fields

    /// `Upload-Offset`: an RFC 8941 integer (at most 15 digits, no sign).
    static func offset(in fields: [(name: String, value: String)]) -> Int64? {
        let values = fields.filter { $0.name.caseInsensitiveCompare("Upload-Offset") == .orderedSame }
        guard values.count == 1 else { return nil }
        let text = values[0].value.trimmingCharacters(in: .whitespaces)
        guard (1...15).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return Int64(text)
    }

    /// Whether the fields say the upload is complete (`Upload-Complete`,
    /// or the inverse `Upload-Incomplete` of version 3); nil when unsaid.
    static func complete(in fields: [(name: String, value: String)], version: Version) -> Bool? {
        let name = version == .v3 ? "Upload-Incomplete" : "Upload-Complete"
        guard let value = fields.first(where: { $0.name.caseInsensitiveCompare(name) == .orderedSame })?.value else { return nil }
        let flag: Bool
        switch value.trimmingCharacters(in: .whitespaces) {
        case "?1": flag = true
        case "?0": flag = false
        default: return nil
        }
        return version == .v3 ? !flag : flag
    }

    /// Same scheme, host and port (the scheme's default when unsaid).
    static func sameOrigin(_ a: URL, _ b: URL) -> Bool {
        func origin(_ url: URL) -> (String, String, Int)? {
            guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
            let port = url.port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : -1)
            return (scheme, host, port)
        }
        guard let left = origin(a), let right = origin(b) else { return false }
        return left == right
    }
}
