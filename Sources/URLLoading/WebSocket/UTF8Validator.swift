/// Checks UTF-8 as its bytes arrive, in pieces (RFC 3629; RFC 6455 §8.1
/// fails a text message at its first invalid byte, not at its end).
/// Overlong forms, surrogates and code points past U+10FFFF are invalid.
struct UTF8Validator: Sendable {
    /// Continuation bytes the current sequence still needs.
    private var needed = 0
    /// The range the next continuation byte must fall in.
    private var lower: UInt8 = 0x80
    private var upper: UInt8 = 0xBF

    /// True when no sequence is cut: the text may end here.
    var isComplete: Bool { needed == 0 }

    /// Feeds `bytes`; false at the first byte that cannot be UTF-8 (the
    /// validator is then of no further use).
    mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        let count = bytes.count
        while index < count {
            let byte = bytes[index]
            index += 1
            if needed == 0 {
                if byte < 0x80 { continue }
                switch byte {
                case 0xC2...0xDF: needed = 1
                case 0xE0: (needed, lower) = (2, 0xA0)
                case 0xE1...0xEC, 0xEE...0xEF: needed = 2
                case 0xED: (needed, upper) = (2, 0x9F)
                case 0xF0: (needed, lower) = (3, 0x90)
                case 0xF1...0xF3: needed = 3
                case 0xF4: (needed, upper) = (3, 0x8F)
                default: return false
                }
            } else {
                guard byte >= lower, byte <= upper else { return false }
                (lower, upper) = (0x80, 0xBF)
                needed -= 1
            }
        }
        return true
    }

    /// Whether `bytes` are whole, valid UTF-8.
    static func isValid(_ bytes: some Collection<UInt8>) -> Bool {
        var validator = UTF8Validator()
        let fed = Array(bytes).withUnsafeBytes { validator.feed($0) }
        return fed && validator.isComplete
    }
}
