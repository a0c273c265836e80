import Foundation

/// RFC 6455 §5.2 framing: opcodes, close codes and how a frame is written.
/// Pure: no socket here (the reader is `WebSocketReader`).
enum WebSocketFrame {
    /// A frame's kind (§5.2, §11.8).
    enum Opcode: UInt8, Sendable {
        case continuation = 0x0
        case text = 0x1
        case binary = 0x2
        case close = 0x8
        case ping = 0x9
        case pong = 0xA

        /// Close, ping and pong: at most 125 bytes, never fragmented (§5.5).
        var isControl: Bool { rawValue & 0x8 != 0 }
    }

    /// The largest payload of a control frame (§5.5).
    static let maximumControlPayload = 125

    /// Close codes (§7.4.1, IANA's registry) the reader and writer name.
    enum Code {
        static let normalClosure: UInt16 = 1000
        static let goingAway: UInt16 = 1001
        static let protocolError: UInt16 = 1002
        static let unsupportedData: UInt16 = 1003
        static let noStatusReceived: UInt16 = 1005
        static let abnormalClosure: UInt16 = 1006
        static let invalidFramePayloadData: UInt16 = 1007
        static let policyViolation: UInt16 = 1008
        static let messageTooBig: UInt16 = 1009
        static let mandatoryExtensionMissing: UInt16 = 1010
        static let internalServerError: UInt16 = 1011
        static let tlsHandshakeFailure: UInt16 = 1015

        /// Whether a peer may send `code` in a close frame: the registered
        /// codes that are not reserved for local use (1005, 1006, 1015 and
        /// 1004 never cross the wire), and 3000–4999 (libraries,
        /// applications).
        static func mayBeSent(_ code: UInt16) -> Bool {
            switch code {
            case 1000...1003, 1007...1014, 3000...4999: true
            default: false
            }
        }
    }

    /// The bytes of one frame: header, then `payload` masked with `mask`
    /// when given (a client masks every frame, §5.3).
    static func encode(
        _ opcode: Opcode, payload: UnsafeRawBufferPointer, fin: Bool = true, compressed: Bool = false, mask: (UInt8, UInt8, UInt8, UInt8)?
    ) -> [UInt8] {
        var frame: [UInt8] = []
        frame.reserveCapacity(payload.count + 14)
        frame.append((fin ? 0x80 : 0) | (compressed ? 0x40 : 0) | opcode.rawValue)
        let maskBit: UInt8 = mask == nil ? 0 : 0x80
        switch payload.count {
        case 0...125:
            frame.append(maskBit | UInt8(payload.count))
        case 126...0xFFFF:
            frame.append(maskBit | 126)
            frame.append(UInt8(payload.count >> 8))
            frame.append(UInt8(payload.count & 0xFF))
        default:
            frame.append(maskBit | 127)
            let length = UInt64(payload.count)
            for shift in stride(from: 56, through: 0, by: -8) { frame.append(UInt8(truncatingIfNeeded: length >> UInt64(shift))) }
        }
        guard let mask else {
            frame.append(contentsOf: payload)
            return frame
        }
        let key = [mask.0, mask.1, mask.2, mask.3]
        frame.append(contentsOf: key)
        let start = frame.count
        frame.append(contentsOf: payload)
        frame.withUnsafeMutableBytes { bytes in
            applyMask(key, to: UnsafeMutableRawBufferPointer(rebasing: bytes[start...]), offset: 0)
        }
        return frame
    }

    /// XORs `bytes` with the masking key, starting `offset` bytes into the
    /// payload (a payload may arrive in pieces). Masking and unmasking are one.
    static func applyMask(_ key: [UInt8], to bytes: UnsafeMutableRawBufferPointer, offset: Int) {
        guard key.count == 4, !bytes.isEmpty else { return }
        var index = 0
        var position = offset & 3
        // Byte by byte until the key lines up, then eight bytes at a time.
        while index < bytes.count, position != 0 {
            bytes[index] ^= key[position]
            index += 1
            position = (position + 1) & 3
        }
        let word = UInt32(key[0]) | UInt32(key[1]) << 8 | UInt32(key[2]) << 16 | UInt32(key[3]) << 24
        let wide = UInt64(word) | UInt64(word) << 32
        while bytes.count - index >= 8 {
            let value = bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            bytes.storeBytes(of: value ^ wide.littleEndian, toByteOffset: index, as: UInt64.self)
            index += 8
        }
        while index < bytes.count {
            bytes[index] ^= key[position]
            index += 1
            position = (position + 1) & 3
        }
    }

    /// A fresh masking key from the system's strong random source (§5.3:
    /// unpredictable, one per frame).
    static func randomMask() -> (UInt8, UInt8, UInt8, UInt8) {
        var generator = SystemRandomNumberGenerator()
        let value = generator.next() as UInt32
        return (UInt8(truncatingIfNeeded: value), UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 24))
    }

    /// A close frame's payload: the code, then the reason (truncated on a
    /// character boundary to fit the 125-byte control limit).
    static func closePayload(code: UInt16?, reason: String) -> [UInt8] {
        guard let code else { return [] }
        var payload = [UInt8(code >> 8), UInt8(code & 0xFF)]
        var reasonBytes = Array(reason.utf8)
        while reasonBytes.count > maximumControlPayload - 2 || !UTF8Validator.isValid(reasonBytes) {
            reasonBytes.removeLast()
        }
        payload += reasonBytes
        return payload
    }
}
