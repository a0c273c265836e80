/// Lower-case hexadecimal text of bytes: digests in Digest authentication
/// and fingerprints, random nonces and boundaries.
package enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    /// `bytes` as lower-case hex, two digits each.
    package static func string(_ bytes: some Sequence<UInt8>) -> String {
        var text: [UInt8] = []
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// `count` random bytes as hex.
    package static func random(bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return string((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }
}

/// The padding of MD5 and the SHA-2 family (RFC 1321 §3.1–3.2, FIPS 180-4
/// §5.1): a 1 bit, zeros, and the message's length in bits, filling the last
/// block.
enum MessagePadding {
    static func padded(_ bytes: [UInt8], blockSize: Int, lengthBytes: Int, bigEndian: Bool) -> [UInt8] {
        var message = bytes
        let bitLength = UInt64(bytes.count) &* 8
        message.append(0x80)
        while message.count % blockSize != blockSize - lengthBytes { message.append(0) }
        // Lengths beyond 64 bits are zeros in their high bytes.
        var length = [UInt8](repeating: 0, count: lengthBytes - 8)
        length += (0..<8).map { UInt8(truncatingIfNeeded: bitLength >> UInt64(8 * (7 - $0))) }
        message += bigEndian ? length : length.reversed()
        return message
    }
}
