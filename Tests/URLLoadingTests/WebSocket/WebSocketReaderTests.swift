import Foundation
import Testing
@testable import URLLoading

/// RFC 6455 framing without a socket: the reader's rules
/// for fragments, control frames, masking, lengths, UTF-8 and close codes.
@Suite struct WebSocketReaderTests {
    typealias Code = WebSocketFrame.Code

    /// A frame as a server sends it (unmasked), or a client (masked).
    static func frame(
        _ opcode: WebSocketFrame.Opcode, _ payload: [UInt8], fin: Bool = true, compressed: Bool = false,
        mask: (UInt8, UInt8, UInt8, UInt8)? = nil
    ) -> [UInt8] {
        payload.withUnsafeBytes { WebSocketFrame.encode(opcode, payload: $0, fin: fin, compressed: compressed, mask: mask) }
    }

    static func text(_ string: String, fin: Bool = true) -> [UInt8] { frame(.text, Array(string.utf8), fin: fin) }

    /// Reads `bytes` in pieces of `step` (every split of a header and payload is met).
    static func read(_ bytes: [UInt8], step: Int = .max, role: WebSocketReader.Role = .client, maximum: Int = 1 << 20) -> [WebSocketReader.Event] {
        var reader = WebSocketReader(role: role, maximumMessageSize: maximum)
        var events: [WebSocketReader.Event] = []
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + step)
            events += bytes[offset..<end].withUnsafeBytes { reader.read($0) }
            offset = end
        }
        return events
    }

    static func failedCode(_ events: [WebSocketReader.Event]) -> UInt16? {
        guard case .failed(let code, _)? = events.last else { return nil }
        return code
    }

    @Test("Text, binary, ping and pong of every length class, fed whole and a byte at a time")
    func lengths() {
        for count in [0, 1, 125, 126, 127, 65_535, 65_536, 200_000] {
            let payload = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let text = String(repeating: "é", count: count / 2)
            let bytes =
                Self.frame(.binary, payload) + Self.text(text) + Self.frame(.ping, Array(payload.prefix(125)))
                + Self.frame(.pong, [1, 2])
            for step in [Int.max, 1, 7, 4096] where count < 70_000 || step != 1 {
                let events = Self.read(bytes, step: step)
                #expect(events == [.binary(Data(payload)), .text(text), .ping(Data(payload.prefix(125))), .pong(Data([1, 2]))], "\(count) by \(step)")
            }
        }
    }

    @Test("Fragments make one message; control frames may come between them; a masked stream reads the same on the server side")
    func fragments() {
        let bytes =
            Self.frame(.text, Array("Hel".utf8), fin: false) + Self.frame(.ping, [9]) + Self.frame(.continuation, Array("lo, ".utf8), fin: false)
            + Self.frame(.pong, []) + Self.frame(.continuation, Array("wörld".utf8)) + Self.frame(.binary, [1], fin: false)
            + Self.frame(.continuation, [2])
        let expected: [WebSocketReader.Event] = [.ping(Data([9])), .pong(Data()), .text("Hello, wörld"), .binary(Data([1, 2]))]
        #expect(Self.read(bytes) == expected)
        #expect(Self.read(bytes, step: 1) == expected)

        // The same frames masked, each with its own key, read by a server.
        let mask = { (n: UInt8) in (n, n &+ 0x51, n &+ 0xA2, n &+ 0xF3) }
        let masked =
            Self.frame(.text, Array("Hel".utf8), fin: false, mask: mask(1)) + Self.frame(.ping, [9], mask: mask(2))
            + Self.frame(.continuation, Array("lo, ".utf8), fin: false, mask: mask(3)) + Self.frame(.pong, [], mask: mask(4))
            + Self.frame(.continuation, Array("wörld".utf8), mask: mask(5)) + Self.frame(.binary, [1], fin: false, mask: mask(6))
            + Self.frame(.continuation, [2], mask: mask(7))
        #expect(Self.read(masked, step: 3, role: .server) == expected)
    }

    @Test("Masking is its own inverse at every offset and length")
    func masking() {
        let key: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
        for length in [0, 1, 3, 7, 8, 9, 31, 1000] {
            for offset in 0..<4 {
                let original = (0..<length).map { UInt8(truncatingIfNeeded: $0) }
                var bytes = original
                bytes.withUnsafeMutableBytes { WebSocketFrame.applyMask(key, to: $0, offset: offset) }
                let expected = original.enumerated().map { $0.element ^ key[($0.offset + offset) & 3] }
                #expect(bytes == expected, "\(length) at \(offset)")
                bytes.withUnsafeMutableBytes { WebSocketFrame.applyMask(key, to: $0, offset: offset) }
                #expect(bytes == original)
            }
        }
        // RFC 6455 §5.7: a masked "Hello".
        #expect(Self.frame(.text, Array("Hello".utf8), mask: (0x37, 0xFA, 0x21, 0x3D)) == [0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58])
        #expect(Self.read([0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58], role: .server) == [.text("Hello")])
    }

    @Test("Protocol violations close with 1002: reserved bits and opcodes, masks on the wrong side, bad control frames, stray continuations")
    func violations() {
        let cases: [(String, [UInt8], WebSocketReader.Role)] = [
            ("RSV2", [0xA1, 0x00], .client),
            ("RSV1 without an extension", [0xC1, 0x00], .client),
            ("opcode 3", [0x83, 0x00], .client),
            ("opcode 0xB", [0x8B, 0x00], .client),
            ("a masked server frame", Self.frame(.text, [0x41], mask: (1, 2, 3, 4)), .client),
            ("an unmasked client frame", Self.frame(.text, [0x41]), .server),
            ("a fragmented ping", Self.frame(.ping, [1], fin: false), .client),
            ("a 126-byte ping", Self.frame(.ping, Array(repeating: 0, count: 126)), .client),
            ("a continuation first", Self.frame(.continuation, [1]), .client),
            ("a text inside a fragmented message", Self.frame(.text, [0x41], fin: false) + Self.text("B"), .client),
            ("a 64-bit length with its top bit set", [0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 1], .client),
            ("a 1-byte close payload", Self.frame(.close, [0x03]), .client),
            ("close code 1005", Self.frame(.close, [0x03, 0xED]), .client),
            ("close code 999", Self.frame(.close, [0x03, 0xE7]), .client),
            ("close code 1016", Self.frame(.close, [0x03, 0xF8]), .client),
            ("close code 5000", Self.frame(.close, [0x13, 0x88]), .client),
        ]
        for (name, bytes, role) in cases {
            let events = Self.read(bytes + Self.text("after"), role: role)
            #expect(Self.failedCode(events) == Code.protocolError, "\(name): \(events)")
            #expect(!events.contains(.text("after")), "\(name): nothing is read after a violation")
        }
    }

    @Test("Text that is not UTF-8 closes with 1007 at its first bad byte, in any fragment; a close reason too")
    func utf8() {
        // An invalid byte in the first fragment fails before the message ends.
        #expect(Self.failedCode(Self.read(Self.frame(.text, [0x41, 0xFF], fin: false))) == Code.invalidFramePayloadData)
        // Overlong, surrogate, past U+10FFFF, a cut sequence at the end.
        for bad: [UInt8] in [[0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82]] {
            #expect(Self.failedCode(Self.read(Self.frame(.text, bad))) == Code.invalidFramePayloadData, "\(bad)")
        }
        // A sequence split across fragments is fine.
        let euro: [UInt8] = [0xE2, 0x82, 0xAC]
        let split = Self.frame(.text, [euro[0]], fin: false) + Self.frame(.continuation, [euro[1]], fin: false) + Self.frame(.continuation, [euro[2]])
        #expect(Self.read(split, step: 1) == [.text("€")])
        #expect(Self.failedCode(Self.read(Self.frame(.close, [0x03, 0xE8, 0xFF]))) == Code.invalidFramePayloadData)
        // Binary messages are not checked.
        #expect(Self.read(Self.frame(.binary, [0xFF])) == [.binary(Data([0xFF]))])
    }

    @Test("Close frames: no code is 1005's nil, codes and reasons read, and nothing is read after them")
    func closes() {
        #expect(Self.read(Self.frame(.close, []) + Self.text("late")) == [.close(code: nil, reason: "")])
        for code: UInt16 in [1000, 1001, 1003, 1007, 1011, 1014, 3000, 4999] {
            let payload = WebSocketFrame.closePayload(code: code, reason: "bye ✓")
            #expect(Self.read(Self.frame(.close, payload) + Self.text("late")) == [.close(code: code, reason: "bye ✓")])
        }
        // A long reason is cut on a character boundary to fit 125 bytes.
        let payload = WebSocketFrame.closePayload(code: 1000, reason: String(repeating: "é", count: 100))
        #expect(payload.count == 124 && UTF8Validator.isValid(payload[2...]))
    }

    @Test("A message over the maximum closes with 1009 before its bytes are kept; a huge announced length too")
    func limits() {
        #expect(Self.failedCode(Self.read(Self.frame(.binary, Array(repeating: 0, count: 101)), maximum: 100)) == Code.messageTooBig)
        #expect(Self.read(Self.frame(.binary, Array(repeating: 0, count: 100)), maximum: 100) == [.binary(Data(count: 100))])
        let fragmented = Self.frame(.binary, Array(repeating: 0, count: 60), fin: false) + Self.frame(.continuation, Array(repeating: 0, count: 60))
        #expect(Self.failedCode(Self.read(fragmented, maximum: 100)) == Code.messageTooBig)
        // 2^62 bytes announced: refused at the header.
        #expect(Self.failedCode(Self.read([0x82, 0x7F, 0x40, 0, 0, 0, 0, 0, 0, 0])) == Code.messageTooBig)
    }
}
