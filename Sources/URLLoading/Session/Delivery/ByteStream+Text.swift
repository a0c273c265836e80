import Foundation

/// A body as text, as Apple's `AsyncBytes` offers it (`lines`,
/// `characters`, `unicodeScalars`; FoundationNetworking has none of the
/// three): each decodes the chunks as they arrive, with the stream's
/// back-pressure, and ends when the body does or throws what it throws.
extension ByteStream {
    /// The body as lines of UTF-8 text, without their line breaks: LF, CR,
    /// CR LF, VT, FF, NEL, LINE SEPARATOR and PARAGRAPH SEPARATOR end a
    /// line, and empty lines are skipped, as in Apple's `AsyncLineSequence`.
    public var lines: Lines { Lines(reader: reader) }

    /// The body as Unicode scalars (UTF-8; what is not becomes U+FFFD).
    public var unicodeScalars: UnicodeScalars { UnicodeScalars(reader: reader) }

    /// The body as Characters (UTF-8; what is not becomes U+FFFD).
    public var characters: Characters { Characters(reader: reader) }

    /// The body as lines of text.
    public struct Lines: AsyncSequence, Sendable {
        public typealias Element = String
        let reader: Reader

        public func makeAsyncIterator() -> Iterator { Iterator(text: TextIterator(reader: reader)) }

        /// Reads the next line.
        public struct Iterator: AsyncIteratorProtocol {
            var text: TextIterator<LineSplitter>
            public mutating func next() async throws -> String? { try await text.next() }
        }
    }

    /// The body as Unicode scalars.
    public struct UnicodeScalars: AsyncSequence, Sendable {
        public typealias Element = Unicode.Scalar
        let reader: Reader

        public func makeAsyncIterator() -> Iterator { Iterator(text: TextIterator(reader: reader)) }

        /// Reads the next scalar.
        public struct Iterator: AsyncIteratorProtocol {
            var text: TextIterator<ScalarDecoder>
            public mutating func next() async throws -> Unicode.Scalar? { try await text.next() }
        }
    }

    /// The body as Characters.
    public struct Characters: AsyncSequence, Sendable {
        public typealias Element = Character
        let reader: Reader

        public func makeAsyncIterator() -> Iterator { Iterator(text: TextIterator(reader: reader)) }

        /// Reads the next character.
        public struct Iterator: AsyncIteratorProtocol {
            var text: TextIterator<CharacterDecoder>
            public mutating func next() async throws -> Character? { try await text.next() }
        }
    }
}

/// Runs a `ChunkDecoder` over a byte stream's chunks.
struct TextIterator<Decoder: ChunkDecoder> {
    let reader: ByteStream.Reader
    private var decoder = Decoder()
    private var ready: [Decoder.Output] = []
    private var index = 0
    private var ended = false

    init(reader: ByteStream.Reader) {
        self.reader = reader
    }

    mutating func next() async throws -> Decoder.Output? {
        while index == ready.count {
            if ended { return nil }
            if let chunk = try await reader.buffer.next() {
                ready = decoder.take(chunk)
            } else {
                ended = true
                ready = decoder.finish()
            }
            index = 0
        }
        defer { index += 1 }
        return ready[index]
    }
}
