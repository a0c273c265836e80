import Foundation

/// A body's bytes as lines of text, a chunk at a time: a pure state
/// machine (chunks in, lines out) under `ByteStream.lines`. Its rules are
/// Apple's `AsyncLineSequence`'s: a line ends at LF, VT, FF, CR, CR LF, NEL
/// (U+0085), LINE SEPARATOR (U+2028) or PARAGRAPH SEPARATOR (U+2029);
/// empty lines are skipped; bytes that are not UTF-8 become U+FFFD (and,
/// unlike Apple's, never take a line break with them). A separator split
/// across two chunks is still one.
/// A decoder of a body's chunks into text elements (lines, scalars,
/// characters): what `ByteStream`'s text views run.
protocol ChunkDecoder {
    associatedtype Output
    init()
    /// The elements `chunk` completes, in order.
    mutating func take(_ chunk: Data) -> [Output]
    /// What is left once the body ended.
    mutating func finish() -> [Output]
}

struct LineSplitter: ChunkDecoder {
    /// The bytes of the line so far.
    private var line: [UInt8] = []
    /// A separator begun at the end of the last chunk.
    private var pending = Pending.none

    private enum Pending {
        case none
        /// A CR: a LF right after it belongs to it.
        case carriageReturn
        /// The first byte of NEL (C2).
        case nextLine
        /// The first byte, or the first two, of U+2028 or U+2029 (E2, E2 80).
        case separator(bytes: Int)
    }

    /// The lines that `chunk` completes, in order.
    mutating func take(_ chunk: Data) -> [String] { take(bytes: chunk) }

    mutating func finish() -> [String] { lastLine().map { [$0] } ?? [] }

    mutating func take(bytes chunk: some Collection<UInt8>) -> [String] {
        var lines: [String] = []
        for byte in chunk {
            switch pending {
            case .none:
                break
            case .carriageReturn:
                pending = .none
                if byte == 0x0A { continue }
            case .nextLine:
                pending = .none
                if byte == 0x85 {
                    endLine(into: &lines)
                    continue
                }
                // Not NEL: the lone C2 is the line's (U+FFFD once decoded), and
                // this byte is read as any other (it may end the line).
                line.append(0xC2)
            case .separator(let bytes):
                if bytes == 1 && byte == 0x80 {
                    pending = .separator(bytes: 2)
                    continue
                }
                pending = .none
                if bytes == 2 && (byte == 0xA8 || byte == 0xA9) {
                    endLine(into: &lines)
                    continue
                }
                line.append(contentsOf: bytes == 1 ? [0xE2] : [0xE2, 0x80])
            }
            switch byte {
            case 0x0D:
                endLine(into: &lines)
                pending = .carriageReturn
            case 0x0A, 0x0B, 0x0C:
                endLine(into: &lines)
            case 0xC2:
                pending = .nextLine
            case 0xE2:
                pending = .separator(bytes: 1)
            default:
                line.append(byte)
            }
        }
        return lines
    }

    /// The last line, when the body ended inside one (a separator begun
    /// and not finished is part of it).
    mutating func lastLine() -> String? {
        switch pending {
        case .none, .carriageReturn: break
        case .nextLine: line.append(0xC2)
        case .separator(let bytes): line.append(contentsOf: bytes == 1 ? [0xE2] : [0xE2, 0x80])
        }
        pending = .none
        var lines: [String] = []
        endLine(into: &lines)
        return lines.first
    }

    private mutating func endLine(into lines: inout [String]) {
        guard !line.isEmpty else { return }
        lines.append(String(decoding: line, as: UTF8.self))
        line.removeAll(keepingCapacity: true)
    }
}

/// A body's bytes as Unicode scalars, a chunk at a time: a UTF-8 sequence
/// split across chunks is decoded whole; what is not UTF-8 becomes U+FFFD.
struct ScalarDecoder: ChunkDecoder {
    /// The start of a sequence that the last chunk ended inside.
    private var carried: [UInt8] = []

    /// The scalars that `chunk` completes, in order.
    mutating func take(_ chunk: Data) -> [Unicode.Scalar] {
        var bytes = carried
        bytes.append(contentsOf: chunk)
        let complete = bytes.count - Self.incompleteTail(of: bytes)
        carried = Array(bytes[complete...])
        return Self.decode(bytes[..<complete])
    }

    /// What is left at the end of the body (an incomplete sequence is U+FFFD).
    mutating func finish() -> [Unicode.Scalar] {
        defer { carried = [] }
        return Self.decode(carried[...])
    }

    private static func decode(_ bytes: ArraySlice<UInt8>) -> [Unicode.Scalar] {
        var scalars: [Unicode.Scalar] = []
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        loop: while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar): scalars.append(scalar)
            case .error: scalars.append("\u{FFFD}")
            case .emptyInput: break loop
            }
        }
        return scalars
    }

    /// How many bytes at the end of `bytes` begin a sequence whose rest has
    /// not come yet (0 when the last sequence is whole or cannot be one).
    static func incompleteTail(of bytes: [UInt8]) -> Int {
        // A lead byte at most three back from the end, with fewer bytes after
        // it than it announces, and only continuation bytes in between.
        for back in stride(from: 1, through: min(3, bytes.count), by: 1) {
            let byte = bytes[bytes.count - back]
            if byte & 0xC0 == 0x80 { continue }
            let length =
                switch byte {
                case 0xC2...0xDF: 2
                case 0xE0...0xEF: 3
                case 0xF0...0xF4: 4
                default: 1  // ASCII, or a byte no sequence starts with
                }
            return length > back ? back : 0
        }
        return 0
    }
}

/// A body's bytes as Characters (grapheme clusters), a chunk at a time: the
/// last character of a chunk waits for the next, which may extend it (a
/// combining mark, the second half of a flag).
struct CharacterDecoder: ChunkDecoder {
    private var scalars = ScalarDecoder()
    /// Decoded text whose last character may still grow.
    private var pending = ""

    mutating func take(_ chunk: Data) -> [Character] {
        pending.unicodeScalars.append(contentsOf: scalars.take(chunk))
        guard let last = pending.indices.last else { return [] }
        defer { pending.removeSubrange(..<last) }
        return Array(pending[..<last])
    }

    mutating func finish() -> [Character] {
        pending.unicodeScalars.append(contentsOf: scalars.finish())
        defer { pending = "" }
        return Array(pending)
    }
}
