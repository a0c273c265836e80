import Foundation

/// Splits a `multipart/x-mixed-replace` body (a server's stream of parts,
/// each replacing the one before: webcams, progress pages) into parts as
/// it arrives, in constant memory: a part's bytes are handed on as they
/// come, holding back only what could be the start of the next delimiter.
/// The framing is RFC 2046 §5.1.1's: `--boundary`, optional padding, CRLF,
/// the part's header fields, an empty line, its body, then `CRLF--boundary`
/// again, and `--` after the last boundary.
///
/// ```
/// preamble ─delimiter line→ headers ─empty line→ body ─delimiter line→ headers
///        └──────────closing delimiter ("--")──────────┴──────────────→ done
/// ```
/// A delimiter counts only when followed by `--`, or by optional padding
/// and CRLF; `--boundaryX` inside a body is body.
struct MixedReplaceParser {
    /// What the bytes so far held.
    enum Event: Equatable {
        /// A part begins, with its header fields.
        case part([HeaderFields.Field])
        /// Bytes of the current part's body.
        case data(Data)
    }

    /// A malformed body.
    struct Failure: Error, Equatable {
        let message: String
    }

    private enum Phase { case preamble, headers, body, done }

    /// A part's header block larger than this is refused.
    static let maximumHeaderBytes = 64 * 1024

    private let delimiter: [UInt8]
    private var phase = Phase.preamble
    /// Bytes not yet decided on. Starts with a CRLF so that a boundary at
    /// the very start of the body matches the same delimiter as later ones.
    private var pending: [UInt8] = [0x0D, 0x0A]

    /// The `boundary` parameter of a `multipart/x-mixed-replace` media type,
    /// or nil for any other content type.
    static func boundary(ofContentType value: String) -> String? {
        var parameters = value.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let type = parameters.first, type.lowercased() == "multipart/x-mixed-replace" else { return nil }
        parameters.removeFirst()
        for parameter in parameters {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2, pair[0].lowercased() == "boundary" else { continue }
            var boundary = pair[1]
            if boundary.count >= 2, boundary.hasPrefix("\""), boundary.hasSuffix("\"") { boundary = String(boundary.dropFirst().dropLast()) }
            // RFC 2046: 1 to 70 characters.
            return (1...70).contains(boundary.utf8.count) ? boundary : nil
        }
        return nil
    }

    init(boundary: String) {
        delimiter = Array("\r\n--\(boundary)".utf8)
    }

    /// Whether the closing delimiter was seen.
    var isDone: Bool { phase == .done }

    /// Takes the next bytes of the body.
    mutating func feed(_ bytes: UnsafeRawBufferPointer) throws(Failure) -> [Event] {
        guard phase != .done else { return [] }
        pending.append(contentsOf: bytes)
        var events: [Event] = []
        var start = 0
        loop: while true {
            switch phase {
            case .preamble, .body:
                var searchFrom = start
                var found: (at: Int, next: Int, closing: Bool)?
                var undecided: Int?
                while let match = find(delimiter, from: searchFrom) {
                    switch delimiterLine(after: match + delimiter.count) {
                    case .closing(let next): found = (match, next, true)
                    case .opening(let next): found = (match, next, false)
                    case .needMore: undecided = match
                    case .notADelimiter: searchFrom = match + 1; continue
                    }
                    break
                }
                if let found {
                    if phase == .body, found.at > start { events.append(.data(Data(pending[start..<found.at]))) }
                    start = found.next
                    phase = found.closing ? .done : .headers
                    if found.closing { start = pending.count; break loop }
                } else {
                    // Keep what could be a delimiter's beginning.
                    let keep = undecided ?? max(start, pending.count - (delimiter.count - 1))
                    if phase == .body, keep > start { events.append(.data(Data(pending[start..<keep]))) }
                    start = keep
                    break loop
                }
            case .headers:
                guard let end = headerBlockEnd(from: start) else {
                    guard pending.count - start <= Self.maximumHeaderBytes else {
                        throw Failure(message: "a multipart part's header block exceeds \(Self.maximumHeaderBytes) bytes")
                    }
                    break loop
                }
                events.append(.part(try Self.fields(pending[start..<end.fields])))
                start = end.body
                phase = .body
            case .done:
                start = pending.count
                break loop
            }
        }
        pending.removeFirst(start)
        return events
    }

    /// The body ended: bytes of an unterminated last part.
    mutating func finish() -> [Event] {
        defer { pending = []; phase = .done }
        guard phase == .body, !pending.isEmpty else { return [] }
        return [.data(Data(pending))]
    }

    private enum DelimiterLine { case opening(next: Int), closing(next: Int), needMore, notADelimiter }

    /// What follows a delimiter's bytes at `index`: `--` closes, padding
    /// and CRLF open a part, anything else makes it body bytes.
    private func delimiterLine(after index: Int) -> DelimiterLine {
        guard pending.count - index >= 2 else { return .needMore }
        if pending[index] == UInt8(ascii: "-"), pending[index + 1] == UInt8(ascii: "-") { return .closing(next: index + 2) }
        var cursor = index
        while cursor < pending.count, pending[cursor] == 0x20 || pending[cursor] == 0x09 { cursor += 1 }
        // Padding without end is not a delimiter line (and must not grow the buffer).
        guard cursor - index <= 256 else { return .notADelimiter }
        guard pending.count - cursor >= 2 else { return .needMore }
        return pending[cursor] == 0x0D && pending[cursor + 1] == 0x0A ? .opening(next: cursor + 2) : .notADelimiter
    }

    private func find(_ needle: [UInt8], from start: Int) -> Int? {
        guard pending.count - start >= needle.count, let first = needle.first else { return nil }
        var index = start
        let last = pending.count - needle.count
        while index <= last {
            if pending[index] == first, pending[index..<(index + needle.count)].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }

    /// Where the header block starting at `start` ends (its fields) and the
    /// part's body begins; a block with no fields is a lone CRLF.
    private func headerBlockEnd(from start: Int) -> (fields: Int, body: Int)? {
        if pending.count - start >= 2, pending[start] == 0x0D, pending[start + 1] == 0x0A { return (start, start + 2) }
        return find([0x0D, 0x0A, 0x0D, 0x0A], from: start).map { ($0, $0 + 4) }
    }

    private static func fields(_ block: ArraySlice<UInt8>) throws(Failure) -> [HeaderFields.Field] {
        var fields: [HeaderFields.Field] = []
        for line in String(decoding: block, as: UTF8.self).components(separatedBy: "\r\n") where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                throw Failure(message: "a multipart part has a malformed header line")
            }
            fields.append(
                HeaderFields.Field(
                    String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        return fields
    }
}
