import CTLS

/// Hashes and random bytes from OpenSSL, for what rides on streams (the
/// WebSocket handshake's key and accept value).
package enum Digests {
    /// SHA-1 of `bytes` (RFC 6455 §4.2.2 names it; not for secrets).
    package static func sha1(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
        _ = bytes.withUnsafeBytes { input in
            digest.withUnsafeMutableBytes { output in
                SHA1(input.baseAddress?.assumingMemoryBound(to: UInt8.self), input.count, output.baseAddress?.assumingMemoryBound(to: UInt8.self))
            }
        }
        return digest
    }

    /// `count` bytes from the system's strong random source.
    package static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<max(0, count)).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }
}
