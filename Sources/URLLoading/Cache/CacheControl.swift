/// The directives of one or more `Cache-Control` field lines (RFC 9111 §5.2),
/// parsed strictly and totally: any byte sequence gives a value, never a trap.
///
/// Grammar: `#( token [ "=" ( token / quoted-string ) ] )`. Directive names
/// are case-insensitive. A duplicated directive counts by its first
/// occurrence (RFC 9111 §4.2.1 allows that or "stale"). A directive that
/// does not fit the grammar (`max-age =5`, `max-age='5'`) is kept as
/// *invalid*: a freshness directive with an invalid value makes the
/// response stale, as §4.2.1 encourages.
package struct CacheControl: Sendable, Equatable {
    /// One directive as it appeared.
    package struct Directive: Sendable, Equatable {
        /// Lowercased name.
        package var name: String
        /// The argument, unquoted; nil when there was none.
        package var argument: String?
        /// The directive did not fit the grammar.
        package var malformed: Bool
    }

    /// A delta-seconds argument (RFC 9111 §1.2.2).
    package enum Seconds: Sendable, Equatable {
        case absent
        /// A value; too large ones are clamped to 2^31 as §1.2.2 says.
        case valid(Int)
        /// Present with a value that is not delta-seconds.
        case invalid
    }

    /// Every directive in order, duplicates included.
    package private(set) var directives: [Directive] = []

    /// Parses the lines of a `Cache-Control` (or any list of the same shape).
    package init(_ lines: [String]) {
        for line in lines { parse(Array(line.utf8)) }
    }

    /// Parses one combined value.
    package init(_ value: String?) {
        self.init(value.map { [$0] } ?? [])
    }

    /// The first directive named `name` (lowercase).
    package func first(_ name: String) -> Directive? {
        directives.first { $0.name == name }
    }

    /// Whether a directive named `name` (lowercase) is present, in any form.
    package func has(_ name: String) -> Bool {
        directives.contains { $0.name == name }
    }

    /// The delta-seconds argument of the first `name` directive.
    ///
    /// Leading digits count and what follows them is ignored (`3600.5` is
    /// 3600), as browsers read it; no leading digit, a missing argument, or
    /// a malformed directive is `.invalid`.
    package func seconds(_ name: String) -> Seconds {
        guard let directive = first(name) else { return .absent }
        guard !directive.malformed, let argument = directive.argument else { return .invalid }
        return Self.deltaSeconds(argument)
    }

    package var noStore: Bool { has("no-store") }
    package var noCache: Bool { has("no-cache") }
    package var isPrivate: Bool { has("private") }
    package var isPublic: Bool { has("public") }
    package var mustRevalidate: Bool { has("must-revalidate") }
    package var proxyRevalidate: Bool { has("proxy-revalidate") }
    package var immutable: Bool { has("immutable") }
    package var onlyIfCached: Bool { has("only-if-cached") }
    package var mustUnderstand: Bool { has("must-understand") }
    package var maxAge: Seconds { seconds("max-age") }
    package var minFresh: Seconds { seconds("min-fresh") }
    package var staleWhileRevalidate: Seconds { seconds("stale-while-revalidate") }
    package var staleIfError: Seconds { seconds("stale-if-error") }

    /// `max-stale` of a request: absent, any staleness (no argument), or a limit.
    package enum MaxStale: Sendable, Equatable {
        case absent, unlimited, limit(Int), invalid
    }

    package var maxStale: MaxStale {
        guard let directive = first("max-stale") else { return .absent }
        if directive.malformed { return .invalid }
        guard let argument = directive.argument else { return .unlimited }
        if case .valid(let n) = Self.deltaSeconds(argument) { return .limit(n) }
        return .invalid
    }

    /// The largest delta-seconds a cache must represent (RFC 9111 §1.2.2).
    package static let maximumSeconds = 2_147_483_648

    package static func deltaSeconds(_ text: String) -> Seconds {
        var value = 0
        var sawDigit = false
        for byte in text.utf8 {
            guard byte >= 0x30, byte <= 0x39 else { break }
            sawDigit = true
            value = min(value * 10 + Int(byte - 0x30), maximumSeconds)
        }
        return sawDigit ? .valid(value) : .invalid
    }

    // MARK: Parsing

    private static func isTokenChar(_ byte: UInt8) -> Bool { FieldSyntax.isTokenByte(byte) }

    private static func isWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

    private mutating func parse(_ bytes: [UInt8]) {
        var i = 0
        let n = bytes.count
        func skipWhitespace() { while i < n, Self.isWhitespace(bytes[i]) { i += 1 } }
        /// Skips to just past the next comma outside a quoted string.
        func skipToNextDirective() {
            var quoted = false
            while i < n {
                let byte = bytes[i]
                if quoted {
                    if byte == UInt8(ascii: "\\") { i += 1 } else if byte == UInt8(ascii: "\"") { quoted = false }
                } else if byte == UInt8(ascii: "\"") {
                    quoted = true
                } else if byte == UInt8(ascii: ",") {
                    i += 1
                    return
                }
                i += 1
            }
        }
        while i < n {
            skipWhitespace()
            if i < n, bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            guard i < n else { break }
            let nameStart = i
            while i < n, Self.isTokenChar(bytes[i]) { i += 1 }
            guard i > nameStart else {
                skipToNextDirective()
                continue
            }
            let name = String(decoding: bytes[nameStart..<i].map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
            var argument: String?
            var malformed = false
            if i < n, bytes[i] == UInt8(ascii: "=") {
                i += 1
                if i < n, bytes[i] == UInt8(ascii: "\"") {
                    i += 1
                    var value: [UInt8] = []
                    var closed = false
                    while i < n {
                        let byte = bytes[i]
                        i += 1
                        if byte == UInt8(ascii: "\\"), i < n {
                            value.append(bytes[i])
                            i += 1
                        } else if byte == UInt8(ascii: "\"") {
                            closed = true
                            break
                        } else {
                            value.append(byte)
                        }
                    }
                    argument = String(decoding: value, as: UTF8.self)
                    malformed = !closed
                } else {
                    let valueStart = i
                    while i < n, Self.isTokenChar(bytes[i]) { i += 1 }
                    argument = String(decoding: bytes[valueStart..<i], as: UTF8.self)
                    malformed = i == valueStart
                }
            }
            skipWhitespace()
            if i < n, bytes[i] != UInt8(ascii: ",") {
                malformed = true
                skipToNextDirective()
            }
            directives.append(Directive(name: name, argument: argument, malformed: malformed))
        }
    }
}
