/// One challenge of a `WWW-Authenticate` or `Proxy-Authenticate` field
/// (RFC 9110 §11.1): a scheme with either a token68 or auth-params.
public struct AuthChallenge: Sendable, Hashable, CustomStringConvertible {
    /// The scheme as sent (compare case-insensitively: `isScheme`).
    public var scheme: String
    /// The token68 form of the credentials' data, if the challenge has one.
    public var token68: String?
    /// The auth-params, names lower-cased, values unescaped; in order.
    public var parameters: [(name: String, value: String)]

    /// A challenge with the given parts.
    public init(scheme: String, token68: String? = nil, parameters: [(name: String, value: String)] = []) {
        self.scheme = scheme
        self.token68 = token68
        self.parameters = parameters.map { ($0.name.lowercased(), $0.value) }
    }

    /// The value of a parameter (names are case-insensitive).
    public subscript(parameter name: String) -> String? {
        let lower = name.lowercased()
        return parameters.first { $0.name == lower }?.value
    }

    /// Whether the scheme is `name`, ignoring case.
    public func isScheme(_ name: String) -> Bool { scheme.lowercased() == name.lowercased() }

    /// The realm parameter, if any.
    public var realm: String? { self[parameter: "realm"] }

    /// Scheme and parameter names; values of nonces and opaque data are not secrets, but are left out to keep logs short.
    public var description: String {
        "\(scheme)(\(parameters.map(\.name).joined(separator: ", ")))"
    }

    /// Whether both name the same scheme and parameters.
    public static func == (a: AuthChallenge, b: AuthChallenge) -> Bool {
        a.scheme.lowercased() == b.scheme.lowercased() && a.token68 == b.token68
            && a.parameters.map { "\($0.name)=\($0.value)" } == b.parameters.map { "\($0.name)=\($0.value)" }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(scheme.lowercased())
        hasher.combine(token68)
        for parameter in parameters {
            hasher.combine(parameter.name)
            hasher.combine(parameter.value)
        }
    }

    /// What to do with a parameter named twice in one challenge.
    public enum DuplicateParameters: Sendable {
        /// The line is invalid (RFC 9110 §11.2: a parameter occurs once).
        case invalid
        /// The last value counts, as curl and browsers read such servers.
        case lastWins
    }

    /// The challenges of the field lines of one response, strictly by RFC
    /// 9110 §11: a line that does not follow the grammar (an unterminated
    /// quoted-string, junk after a value, no space after the scheme)
    /// contributes no challenge at all, and never stops the other lines
    /// from being read.
    public static func parse(_ fieldLines: [String], duplicateParameters: DuplicateParameters = .invalid) -> [AuthChallenge] {
        fieldLines.flatMap { parseLine($0, duplicateParameters: duplicateParameters) ?? [] }
    }

    /// The challenges of one field line, or nil when it is invalid.
    static func parseLine(_ line: String, duplicateParameters: DuplicateParameters) -> [AuthChallenge]? {
        var scanner = ChallengeScanner(Array(line.utf8))
        var challenges: [AuthChallenge] = []
        while true {
            scanner.skipListSeparators()
            if scanner.atEnd { break }
            guard let scheme = scanner.token() else { return nil }
            var challenge = AuthChallenge(scheme: scheme)
            // Only SP may separate the scheme from what follows it.
            let spaces = scanner.skip { $0 == 0x20 }
            if scanner.atEnd || (scanner.peek == UInt8(ascii: ",") && spaces == 0) {
                challenges.append(challenge)
                continue
            }
            guard spaces > 0 else { return nil }
            if scanner.peek == UInt8(ascii: ",") {
                // Empty list elements may come before the first auth-param;
                // otherwise the comma ends a bare scheme.
                let mark = scanner.index
                scanner.skipListSeparators()
                if scanner.atEnd || !scanner.startsAuthParam() {
                    scanner.index = mark
                    challenges.append(challenge)
                    continue
                }
            }
            if let token68 = scanner.token68() {
                challenge.token68 = token68
                challenges.append(challenge)
                continue
            }
            var names = Set<String>()
            while true {
                guard let name = scanner.token() else { return nil }
                scanner.skipWhitespace()
                guard scanner.consume(UInt8(ascii: "=")) else { return nil }
                scanner.skipWhitespace()
                let value: String
                if scanner.peek == UInt8(ascii: "\"") {
                    guard let quoted = scanner.quotedString() else { return nil }
                    value = quoted
                } else {
                    guard let token = scanner.token() else { return nil }
                    value = token
                }
                if !names.insert(name.lowercased()).inserted {
                    // A parameter name may occur once per challenge (§11.2).
                    guard duplicateParameters == .lastWins else { return nil }
                    challenge.parameters.removeAll { $0.name == name.lowercased() }
                }
                challenge.parameters.append((name.lowercased(), value))
                scanner.skipWhitespace()
                if scanner.atEnd { break }
                guard scanner.peek == UInt8(ascii: ",") else { return nil }
                scanner.skipListSeparators()
                // Another auth-param of this challenge, or the next challenge's scheme.
                if scanner.atEnd || !scanner.startsAuthParam() { break }
            }
            challenges.append(challenge)
        }
        return challenges
    }
}

/// A cursor over a field value's bytes for the challenge grammar.
struct ChallengeScanner {
    let bytes: [UInt8]
    var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { index >= bytes.count }
    var peek: UInt8? { atEnd ? nil : bytes[index] }

    mutating func consume(_ byte: UInt8) -> Bool {
        guard peek == byte else { return false }
        index += 1
        return true
    }

    @discardableResult
    mutating func skip(while predicate: (UInt8) -> Bool) -> Int {
        let start = index
        while let byte = peek, predicate(byte) { index += 1 }
        return index - start
    }

    mutating func skipWhitespace() { skip { $0 == 0x20 || $0 == 0x09 } }

    /// OWS and empty list elements: `*( OWS "," ) OWS`.
    mutating func skipListSeparators() { skip { $0 == 0x20 || $0 == 0x09 || $0 == UInt8(ascii: ",") } }

    static func isTokenChar(_ byte: UInt8) -> Bool { FieldSyntax.isTokenByte(byte) }

    static func isToken68Char(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "-._~+/".utf8.contains(byte)
        }
    }

    mutating func token() -> String? {
        let start = index
        skip(while: Self.isTokenChar)
        return index > start ? String(decoding: bytes[start..<index], as: UTF8.self) : nil
    }

    /// A token68 that makes up the rest of the challenge (followed by the
    /// end or a comma); the cursor does not move otherwise.
    mutating func token68() -> String? {
        let start = index
        skip(while: Self.isToken68Char)
        guard index > start else { index = start; return nil }
        skip { $0 == UInt8(ascii: "=") }
        let end = index
        skipWhitespace()
        guard atEnd || peek == UInt8(ascii: ",") else {
            index = start
            return nil
        }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    /// Whether the cursor is at `token BWS "="` (an auth-param, not a new scheme).
    func startsAuthParam() -> Bool {
        var probe = self
        guard probe.token() != nil else { return false }
        probe.skipWhitespace()
        return probe.peek == UInt8(ascii: "=")
    }

    /// A quoted-string, unescaped; nil when unterminated or holding a control character.
    mutating func quotedString() -> String? {
        guard consume(UInt8(ascii: "\"")) else { return nil }
        var value: [UInt8] = []
        while let byte = peek {
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(decoding: value, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard let escaped = peek, escaped == 0x09 || escaped >= 0x20, escaped != 0x7F else { return nil }
                value.append(escaped)
                index += 1
            case 0x09, 0x20...0x7E, 0x80...0xFF:
                value.append(byte)
            default:
                return nil
            }
        }
        return nil
    }
}
