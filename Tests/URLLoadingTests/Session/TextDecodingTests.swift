import Foundation
import Testing
@testable import URLLoading

/// The decoders under `ByteStream.lines`, `unicodeScalars` and
/// `characters`, fed chunks as a transfer would cut them.
@Suite struct TextDecodingTests {
    /// Everything `Decoder` makes of `text`'s UTF-8 bytes cut into chunks at `cuts`.
    static func decode<Decoder: ChunkDecoder>(_: Decoder.Type, _ bytes: [UInt8], cuts: [Int]) -> [Decoder.Output] {
        var decoder = Decoder()
        var output: [Decoder.Output] = []
        var start = 0
        for cut in cuts + [bytes.count] where cut >= start {
            output += decoder.take(Data(bytes[start..<cut]))
            start = cut
        }
        return output + decoder.finish()
    }

    /// Every way of cutting `bytes` into two chunks, and into single bytes.
    static func cuttings(_ bytes: [UInt8]) -> [[Int]] {
        (0...bytes.count).map { [$0] } + [Array(0...bytes.count)]
    }

    @Test("Lines end at LF, CR, CR LF, VT, FF, NEL, U+2028 and U+2029; empty lines are skipped; a separator split across chunks is one")
    func lines() {
        let text = Array("one\r\ntwo\rthree\n\nfour\u{0B}five\u{0C}six\u{85}seven\u{2028}eight\u{2029}nine\r\r\nten".utf8)
        let expected = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
        for cuts in Self.cuttings(text) {
            #expect(Self.decode(LineSplitter.self, text, cuts: cuts) == expected, "cut at \(cuts)")
        }
        // No empty line at the end; a last line without a break is one.
        #expect(Self.decode(LineSplitter.self, Array("a\n".utf8), cuts: []) == ["a"])
        #expect(Self.decode(LineSplitter.self, Array("\n\r\n".utf8), cuts: []) == [])
        // Other characters that begin as NEL and the separators do stay in the line.
        let lookalikes = Array("é\u{A9}\u{2030}—x".utf8)
        for cuts in Self.cuttings(lookalikes) {
            #expect(Self.decode(LineSplitter.self, lookalikes, cuts: cuts) == ["é\u{A9}\u{2030}—x"], "cut at \(cuts)")
        }
        // A separator's first bytes at the very end belong to the last line (repaired).
        #expect(Self.decode(LineSplitter.self, [0x61, 0xE2, 0x80], cuts: [1]) == ["a\u{FFFD}"])
        #expect(Self.decode(LineSplitter.self, [0x61, 0xFF, 0x0A], cuts: []) == ["a\u{FFFD}"])
        // A broken sequence before a line break does not swallow it.
        for bytes: [UInt8] in [[0x61, 0xC2, 0x0A, 0x62], [0x61, 0xE2, 0x0A, 0x62], [0x61, 0xE2, 0x80, 0x0D, 0x62]] {
            for cuts in Self.cuttings(bytes) {
                #expect(Self.decode(LineSplitter.self, bytes, cuts: cuts) == ["a\u{FFFD}", "b"], "\(bytes) cut at \(cuts)")
            }
        }
    }

    @Test("Scalars and characters: a sequence or a cluster split across chunks comes out whole; bytes that are not UTF-8 become U+FFFD")
    func scalarsAndCharacters() {
        let text = "a\u{E9}\u{20AC}\u{1F600}e\u{301}\u{1F1EB}\u{1F1F7}!"
        let bytes = Array(text.utf8)
        for cuts in Self.cuttings(bytes) {
            #expect(Self.decode(ScalarDecoder.self, bytes, cuts: cuts) == Array(text.unicodeScalars), "cut at \(cuts)")
            #expect(Self.decode(CharacterDecoder.self, bytes, cuts: cuts) == Array(text), "cut at \(cuts)")
        }
        // A lone continuation byte, a truncated sequence at the end, a byte no sequence starts with.
        #expect(Self.decode(ScalarDecoder.self, [0x80, 0x61, 0xF5, 0x62, 0xE2, 0x82], cuts: [4]) == ["\u{FFFD}", "a", "\u{FFFD}", "b", "\u{FFFD}"])
        #expect(ScalarDecoder.incompleteTail(of: [0x61, 0xF0, 0x9F]) == 2)
        #expect(ScalarDecoder.incompleteTail(of: [0x61, 0xF0, 0x9F, 0x98, 0x80]) == 0)
        #expect(ScalarDecoder.incompleteTail(of: [0xF5, 0x80]) == 0)
        #expect(ScalarDecoder.incompleteTail(of: []) == 0)
    }
}
