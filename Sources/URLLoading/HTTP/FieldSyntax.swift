/// What a request may carry onto the wire (RFC 9110 §5.1, §5.5, §9.1): a
/// method and field names are tokens; a field value has no CR, LF or NUL.
/// Anything else would let a caller's data (or data the caller passed on)
/// write lines of its own into the request.
enum FieldSyntax {
    /// RFC 9110 §5.6.2 tchar.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// Whether `text` is a non-empty token.
    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy(isTokenByte)
    }

    /// Whether a field value can be sent as one line.
    static func isSendableValue(_ text: String) -> Bool {
        !text.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }
    }

    /// Why a request cannot be sent as it is, or nil when it can. Names are
    /// shown (with their offending bytes escaped); values never are, as they
    /// may be secrets.
    static func problem(method: String, fields: [(name: String, value: String)]) -> String? {
        guard isToken(method) else { return "the method \(escaped(method)) is not a token (RFC 9110 §9.1): it may not hold spaces, CR, LF or NUL" }
        for field in fields {
            guard isToken(field.name) else {
                return "the header field name \(escaped(field.name)) is not a token (RFC 9110 §5.1): it may not hold spaces, colons, CR, LF or NUL"
            }
            guard isSendableValue(field.value) else {
                return "the value of header field \(field.name) holds CR, LF or NUL (RFC 9110 §5.5)"
            }
        }
        return nil
    }

    /// `text` quoted, with control bytes shown as escapes, at most 64 characters.
    private static func escaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(64) {
            out += scalar.value < 0x20 || scalar.value == 0x7F ? "\\u{\(String(scalar.value, radix: 16))}" : String(scalar)
        }
        return "\"\(out)\(text.unicodeScalars.count > 64 ? "…" : "")\""
    }

    /// Fields the session sends itself, whatever the caller set (as Apple's
    /// session does): the length and framing follow the body, the host the URL.
    static let sessionOwnedFields = ["Content-Length", "Transfer-Encoding", "Host", "Connection"]

    /// Whether `name` is one of `sessionOwnedFields`.
    static func isSessionOwned(_ name: String) -> Bool {
        sessionOwnedFields.contains { HeaderFields.namesEqual(name, $0) }
    }
}

/// Numbers read from header fields, checked before any arithmetic.
package enum FieldNumber {
    /// The largest body length taken at its word (2^53 bytes, 8 PiB): any
    /// sum of it with a file offset or another length stays far from
    /// overflow. A server claiming more is treated as not saying.
    package static let maximumLength: Int64 = 1 << 53

    /// A length field's value (Content-Length: digits only, RFC 9110 §8.6),
    /// or nil when absent, malformed, or beyond `maximumLength`. Several
    /// lines or members must agree.
    package static func length(_ text: String) -> Int64? {
        // One pass over the bytes, nothing allocated: every response's
        // Content-Length comes through here, on the transport's thread.
        var result: Int64?
        var value: Int64 = 0
        var digits = 0
        var afterDigits = false
        /// The member just read, checked against the limit and the members before.
        func member() -> Bool {
            guard digits > 0, value <= maximumLength, result == nil || result == value else { return false }
            result = value
            return true
        }
        for byte in text.utf8 {
            switch byte {
            case 0x30...0x39:
                // 16 digits stay far below Int64.max; more are refused.
                guard !afterDigits, digits < 16 else { return nil }
                value = value * 10 + Int64(byte - 0x30)
                digits += 1
            case 0x20, 0x09:
                afterDigits = digits > 0
            case 0x2C:
                guard member() else { return nil }
                (value, digits, afterDigits) = (0, 0, false)
            default:
                return nil
            }
        }
        return member() ? result : nil
    }
}
