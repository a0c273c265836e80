/// The response head as libcurl hands it over, one line at a time, parsed
/// into a status, a version and header fields: a pure state machine, tested
/// with bytes.
///
/// ```
/// awaiting status line ─"HTTP/x nnn"→ in head ─field lines (obs-fold joins)→ in head
///        ↑                                 └─blank line→ 1xx (not 101): reported, then forgotten, awaiting the next head
///        └──────────────────────────────────────────────  else: the final head is complete
/// any line past `maximumBytes` in all, a malformed status or field line → failed
/// after the final head: field lines are trailers (a chunked body's), their blank line → endOfTrailers;
///   a status line there begins the next response of the transfer (libcurl's NTLM rounds)
/// ```
package struct ResponseHeadParser {
    /// What one line did.
    package enum Event: Equatable {
        /// Nothing to act on yet.
        case none
        /// A field names a content or transfer coding libcurl does not
        /// decode: the body must go through untouched.
        case undecodableCoding
        /// The blank line of the final head.
        case endOfHead
        /// The blank line after a chunked body's trailer fields (`trailers`).
        case endOfTrailers
        /// The blank line of an interim (1xx, not 101) head: here it is; the
        /// parser forgets it and awaits the next head.
        case interimHead(ResponseHead)
        /// The head cannot be used; the transfer stops.
        case failed(TransferError)
    }

    /// Bytes of head (all heads of the response) taken in all.
    package let maximumBytes: Int
    package private(set) var status = 0
    package private(set) var httpVersion = ""
    package private(set) var reasonPhrase = ""
    package private(set) var headers: [(name: String, value: String)] = []
    /// Fields after the body (RFC 9112 §7.1.2), which libcurl hands over as
    /// header lines once the final head ended.
    package private(set) var trailers: [(name: String, value: String)] = []
    /// The final head's blank line came: further lines are trailers.
    private var headEnded = false
    private var bytes = 0

    package init(maximumBytes: Int) {
        self.maximumBytes = maximumBytes
    }

    /// The final head, once its status line came (nil before, or while only
    /// interim heads arrived).
    package var finalHead: ResponseHead? {
        status >= 200 ? ResponseHead(status: status, httpVersion: httpVersion, headers: headers, reasonPhrase: reasonPhrase) : nil
    }

    /// Takes one line, with its CR LF.
    package mutating func line(_ raw: UnsafeRawBufferPointer) -> Event {
        bytes += raw.count
        guard bytes <= maximumBytes else { return .failed(.headTooLarge(maximumBytes)) }
        // Work on bytes: as Characters "\r\n" is one grapheme, and Foundation's
        // trimming costs more than the whole line.
        var end = raw.count
        while end > 0, raw[end - 1] == 0x0A || raw[end - 1] == 0x0D { end -= 1 }
        // A status line after a final head is the next response on the same
        // transfer (libcurl's own NTLM or Negotiate rounds), not a trailer:
        // "/" cannot be in a field name.
        if headEnded, !UnsafeRawBufferPointer(rebasing: raw[0..<end]).starts(with: "HTTP/".utf8) {
            guard end > 0 else { return .endOfTrailers }
            // A malformed trailer is dropped: the body it follows is whole.
            if let field = Self.field(UnsafeRawBufferPointer(rebasing: raw[0..<end])) { trailers.append(field) }
            return .none
        }
        if end == 0 {
            if (100..<200).contains(status) && status != 101 {
                let interim = ResponseHead(status: status, httpVersion: httpVersion, headers: headers, reasonPhrase: reasonPhrase)
                status = 0
                return .interimHead(interim)
            }
            headEnded = status >= 200
            return .endOfHead
        }
        let line = UnsafeRawBufferPointer(rebasing: raw[0..<end])
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
        func text(_ range: Range<Int>) -> String {
            var lower = range.lowerBound, upper = range.upperBound
            while lower < upper, isSpace(line[lower]) { lower += 1 }
            while upper > lower, isSpace(line[upper - 1]) { upper -= 1 }
            return String(decoding: UnsafeRawBufferPointer(rebasing: line[lower..<upper]), as: UTF8.self)
        }
        if line.starts(with: "HTTP/".utf8) {
            // A new status line: an interim (1xx) head before it is forgotten.
            // "HTTP-version SP status-code [SP reason]", read off the bytes.
            let space = UInt8(ascii: " ")
            var versionEnd = 0
            while versionEnd < line.count, line[versionEnd] != space { versionEnd += 1 }
            var codeStart = versionEnd
            while codeStart < line.count, line[codeStart] == space { codeStart += 1 }
            var code = 0
            var index = codeStart
            while index < line.count, index - codeStart < 4, (0x30...0x39).contains(line[index]) {
                code = code * 10 + Int(line[index] - 0x30)
                index += 1
            }
            guard index - codeStart == 3, index == line.count || line[index] == space, (100...999).contains(code) else {
                return .failed(.badResponse("malformed status line"))
            }
            status = code
            headEnded = false
            trailers = []
            httpVersion = String(decoding: UnsafeRawBufferPointer(rebasing: line[0..<versionEnd]), as: UTF8.self)
            // The rest of the line (RFC 9112 §4: it may be empty or absent).
            reasonPhrase = index < line.count ? text(index..<line.count) : ""
            // Room for a usual head's fields, so appends do not grow the array.
            headers = []
            headers.reserveCapacity(16)
            return .none
        }
        if isSpace(line[0]) {
            // obs-fold (RFC 9112 §5.2): a continuation of the previous line.
            guard !headers.isEmpty else { return .failed(.badResponse("malformed header line")) }
            headers[headers.count - 1].value += " " + text(0..<line.count)
            return .none
        }
        guard let field = Self.field(line) else { return .failed(.badResponse("malformed header line")) }
        headers.append(field)
        let isCoding =
            Self.asciiCaseInsensitiveEqual(field.name, "content-encoding")
            || Self.asciiCaseInsensitiveEqual(field.name, "transfer-encoding")
        return isCoding && !Self.decodableCodings(field.value) ? .undecodableCoding : .none
    }

    /// "name: value" with the value's surrounding spaces and tabs trimmed;
    /// nil without a colon, with an empty name, or with a space in the name.
    private static func field(_ line: UnsafeRawBufferPointer) -> (name: String, value: String)? {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0, !line[0..<colon].contains(where: isSpace) else { return nil }
        var lower = colon + 1, upper = line.count
        while lower < upper, isSpace(line[lower]) { lower += 1 }
        while upper > lower, isSpace(line[upper - 1]) { upper -= 1 }
        return (
            String(decoding: UnsafeRawBufferPointer(rebasing: line[0..<colon]), as: UTF8.self),
            String(decoding: UnsafeRawBufferPointer(rebasing: line[lower..<upper]), as: UTF8.self)
        )
    }

    /// Whether `name` equals `lowercase` ignoring ASCII case (Foundation's
    /// caseInsensitiveCompare costs microseconds per header line).
    package static func asciiCaseInsensitiveEqual(_ name: some StringProtocol, _ lowercase: StaticString) -> Bool {
        let target = UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
        guard name.utf8.count == target.count else { return false }
        return zip(name.utf8, target).allSatisfy { ($0 | 0x20) == $1 }
    }

    /// Codings libcurl decodes (Debian's build: gzip, deflate, br, zstd).
    private static let knownCodings: Set<String> = ["gzip", "x-gzip", "deflate", "br", "zstd", "identity", "chunked"]

    /// Whether every coding a Content-Encoding value lists is one libcurl decodes.
    static func decodableCodings(_ value: String) -> Bool {
        FieldList.members(value).allSatisfy { knownCodings.contains($0.lowercased()) }
    }
}
