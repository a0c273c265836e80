import Foundation
import Transport

/// An HTTP/1.1 response read from raw bytes (RFC 9112): the head, then the
/// body by its framing (Content-Length, chunked, until close, none). A pure
/// state machine, tested with bytes, for requests that run on a connection
/// of the session's own (`becomeStream`).
///
/// ```
/// head ─1xx (not 101)→ interim, head again
///   └─final head→ body(length | chunked | until close) ─→ done
///   └─101, 204, 304, a HEAD's answer→ done (what follows is the next protocol's)
/// a malformed head or chunk line, a lying length, a head past its bound → failed
/// ```
///
/// Pulled, never pushed: `next()` takes one step. A step that produces
/// body bytes is taken on a copy (`var trial = reader`) and kept only when
/// the bytes were taken; until then every byte after the head stays raw
/// (`unread`), which is what a connection handed over must begin with.
struct HTTP1ResponseReader {
    enum Step: Equatable {
        /// The bytes so far end mid-step: append more (or the end).
        case needMore
        /// An interim (1xx, not 101) head.
        case interim(ResponseHead)
        /// The final head.
        case head(ResponseHead)
        /// Body bytes, decoded from the framing (never empty).
        case body(ArraySlice<UInt8>)
        /// The response is complete; `unread` holds what followed it.
        case end
        case failed(TransferError)
    }

    private enum Phase: Equatable {
        case head
        case length(remaining: Int64)
        case untilClose
        case chunkSize
        case chunkData(remaining: Int64)
        case chunkDataEnd
        case trailers
        case done
    }

    /// Longest chunk-size or trailer line taken.
    static let maximumLineBytes = 8192

    private let isHead: Bool
    private var parser: ResponseHeadParser
    private var phase = Phase.head
    private var buffer: [UInt8] = []
    private var offset = 0
    private var ended = false
    private var trailerBytes = 0

    init(method: String, maximumHeadBytes: Int) {
        isHead = method.uppercased() == "HEAD"
        parser = ResponseHeadParser(maximumBytes: maximumHeadBytes)
    }

    /// Bytes received and not yet read: after the final head and before any
    /// body byte was taken, everything the server sent after its head.
    var unread: ArraySlice<UInt8> { buffer[offset...] }

    /// A chunked body's trailer fields, once the body ended.
    var trailers: [(name: String, value: String)] { parser.trailers }

    /// Whether the final head was read.
    var pastHead: Bool { phase != .head }

    /// Takes bytes from the connection.
    mutating func append(_ bytes: some Collection<UInt8>) {
        if offset > 0 && offset == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            offset = 0
        } else if offset > 64 * 1024 && offset * 2 > buffer.count {
            buffer.removeFirst(offset)
            offset = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The peer closed its side.
    mutating func appendEnd() { ended = true }

    /// Takes one step.
    mutating func next() -> Step {
        switch phase {
        case .head: return headStep()
        case .length(let remaining):
            if remaining == 0 { return finish() }
            let available = buffer.count - offset
            if available == 0 {
                return ended ? .failed(.badResponse("the connection closed \(remaining) bytes before the body's declared end")) : .needMore
            }
            let count = Int(min(Int64(available), remaining))
            phase = .length(remaining: remaining - Int64(count))
            return take(count)
        case .untilClose:
            if offset < buffer.count { return take(buffer.count - offset) }
            return ended ? finish() : .needMore
        case .chunkSize:
            guard let line = takeLine() else { return lineShortage() }
            guard let size = Self.chunkSize(line) else { return .failed(.badResponse("malformed chunk size line")) }
            phase = size == 0 ? .trailers : .chunkData(remaining: size)
            return next()
        case .chunkData(let remaining):
            let available = buffer.count - offset
            if available == 0 { return ended ? .failed(.badResponse("the connection closed inside a chunk")) : .needMore }
            let count = Int(min(Int64(available), remaining))
            phase = remaining == Int64(count) ? .chunkDataEnd : .chunkData(remaining: remaining - Int64(count))
            return take(count)
        case .chunkDataEnd:
            guard let line = takeLine() else { return lineShortage() }
            guard line.isEmpty else { return .failed(.badResponse("a chunk's data is longer than its size")) }
            phase = .chunkSize
            return next()
        case .trailers:
            guard let line = takeLine() else { return lineShortage() }
            trailerBytes += line.count + 2
            guard trailerBytes <= parser.maximumBytes else { return .failed(.headTooLarge(parser.maximumBytes)) }
            if line.isEmpty { return finish() }
            // Past the final head, the parser keeps field lines as trailers.
            _ = line.withUnsafeBytes { parser.line($0) }
            return next()
        case .done:
            return .end
        }
    }

    private mutating func headStep() -> Step {
        while let end = lineEnd() {
            let event = buffer.withUnsafeBytes { raw in parser.line(UnsafeRawBufferPointer(rebasing: raw[offset..<end])) }
            offset = end
            switch event {
            case .none, .undecodableCoding, .endOfTrailers: continue
            case .interimHead(let head): return .interim(head)
            case .failed(let error): return .failed(error)
            case .endOfHead:
                let head = ResponseHead(status: parser.status, httpVersion: parser.httpVersion, headers: parser.headers, reasonPhrase: parser.reasonPhrase)
                guard parser.status >= 100 else { return .failed(.badResponse("a blank line before the status line")) }
                switch framing(of: head) {
                case .success(let phase): self.phase = phase
                case .failure(let error): return .failed(error)
                }
                return .head(head)
            }
        }
        if buffer.count - offset > parser.maximumBytes { return .failed(.headTooLarge(parser.maximumBytes)) }
        return ended ? .failed(.badResponse("the connection closed before the response's head ended")) : .needMore
    }

    /// RFC 9112 §6.3: how the body's end is known.
    private func framing(of head: ResponseHead) -> Result<Phase, TransferError> {
        if isHead || head.status < 200 || head.status == 204 || head.status == 304 { return .success(.done) }
        let codings = head.headers.filter { ResponseHeadParser.asciiCaseInsensitiveEqual($0.name, "transfer-encoding") }
        if !codings.isEmpty {
            let last = codings.last.flatMap { FieldList.last($0.value, quoted: true) }?.lowercased()
            return .success(last == "chunked" ? .chunkSize : .untilClose)
        }
        let lengths = head.headers.filter { ResponseHeadParser.asciiCaseInsensitiveEqual($0.name, "content-length") }
        guard !lengths.isEmpty else { return .success(.untilClose) }
        // Repeated values must agree ("5, 5" or two fields of 5).
        let values = Set(FieldList.members(lengths.map(\.value)).map(String.init))
        guard values.count == 1, let text = values.first, !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let length = Int64(text)
        else { return .failure(.badResponse("malformed Content-Length")) }
        return .success(.length(remaining: length))
    }

    private mutating func take(_ count: Int) -> Step {
        let slice = buffer[offset..<(offset + count)]
        offset += count
        return .body(slice)
    }

    private mutating func finish() -> Step {
        phase = .done
        return .end
    }

    /// The index past the next LF, if a whole line is buffered.
    private func lineEnd() -> Int? {
        buffer[offset...].firstIndex(of: 0x0A).map { $0 + 1 }
    }

    /// The next line without its CR LF, taken; nil when it is incomplete.
    private mutating func takeLine() -> ArraySlice<UInt8>? {
        guard let end = lineEnd(), end - offset <= Self.maximumLineBytes else { return nil }
        var line = buffer[offset..<(end - 1)]
        if line.last == 0x0D { line = line.dropLast() }
        offset = end
        return line
    }

    private func lineShortage() -> Step {
        if buffer.count - offset > Self.maximumLineBytes { return .failed(.badResponse("a chunk line longer than \(Self.maximumLineBytes) bytes")) }
        return ended ? .failed(.badResponse("the connection closed inside the chunked body")) : .needMore
    }

    /// A chunk-size line's size (extensions ignored); nil when malformed or
    /// past 2^60 (15 hex digits).
    static func chunkSize(_ line: ArraySlice<UInt8>) -> Int64? {
        let digits = line.prefix { $0 != UInt8(ascii: ";") && $0 != 0x20 && $0 != 0x09 }
        guard !digits.isEmpty, digits.count <= 15 else { return nil }
        var size: Int64 = 0
        for byte in digits {
            let value: Int64
            switch byte {
            case 0x30...0x39: value = Int64(byte - 0x30)
            case 0x41...0x46: value = Int64(byte - 0x41 + 10)
            case 0x61...0x66: value = Int64(byte - 0x61 + 10)
            default: return nil
            }
            size = size * 16 + value
        }
        return size
    }
}
