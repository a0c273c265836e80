/// The members of a list-valued header field (RFC 9110 §5.6.1): split at
/// each comma — outside quoted strings (§5.6.4, backslash escapes
/// included) where the field's grammar has them (`quoted`), at every comma
/// where it has only tokens (Vary, Connection, Content-Length), so that no
/// member of those holds a comma whatever the value —, optional whitespace
/// (SP, HTAB) around each member removed, empty members ignored as the RFC
/// asks of a recipient.
///
/// The value is read by bytes. Splitting a `String` by `Character` would
/// miss a comma followed by a combining mark (the two are one `Character`),
/// so a value could name one member where every other reader of the field
/// sees two.
package enum FieldList {
    /// The members of one field line, in order.
    package static func members(_ value: String, quoted: Bool = false, separator: UInt8 = UInt8(ascii: ",")) -> [Substring] {
        var result: [Substring] = []
        forEachMember(of: value, quoted: quoted, separator: separator) { result.append($0) }
        return result
    }

    /// The members of every line of a field, in order (lines combine as if
    /// joined by commas, RFC 9110 §5.3).
    package static func members(_ lines: [String], quoted: Bool = false) -> [Substring] {
        var result: [Substring] = []
        for line in lines { forEachMember(of: line, quoted: quoted) { result.append($0) } }
        return result
    }

    /// The first member of `value`, or nil when it lists none.
    package static func first(_ value: String, quoted: Bool = false) -> Substring? {
        var found: Substring?
        forEachMember(of: value, quoted: quoted) { member in
            if found == nil { found = member }
        }
        return found
    }

    /// The last member of `value`, or nil when it lists none.
    package static func last(_ value: String, quoted: Bool = false) -> Substring? {
        var found: Substring?
        forEachMember(of: value, quoted: quoted) { found = $0 }
        return found
    }

    /// Calls `body` with each non-empty member of `value`, trimmed, in order.
    ///
    /// - Parameters:
    ///   - quoted: The field's members may hold quoted strings, whose
    ///     separators do not separate.
    ///   - separator: The byte between members: a comma, or a semicolon
    ///     between one member's parameters.
    package static func forEachMember(
        of value: String, quoted quoting: Bool = false, separator: UInt8 = UInt8(ascii: ","), _ body: (Substring) -> Void
    ) {
        let utf8 = value.utf8
        var start = utf8.startIndex
        var index = start
        var quoted = false
        while index < utf8.endIndex {
            let byte = utf8[index]
            if quoted {
                if byte == UInt8(ascii: "\\") {
                    utf8.formIndex(after: &index)
                    if index == utf8.endIndex { break }
                } else if byte == UInt8(ascii: "\"") {
                    quoted = false
                }
            } else if quoting, byte == UInt8(ascii: "\"") {
                quoted = true
            } else if byte == separator {
                emit(value, start, index, body)
                start = utf8.index(after: index)
            }
            utf8.formIndex(after: &index)
        }
        emit(value, start, utf8.endIndex, body)
    }

    /// Hands `body` the bytes between `start` and `end` without the
    /// whitespace around them, unless nothing is left.
    private static func emit(_ value: String, _ start: String.Index, _ end: String.Index, _ body: (Substring) -> Void) {
        let utf8 = value.utf8
        var lower = start
        var upper = end
        while lower < upper, isWhitespace(utf8[lower]) { utf8.formIndex(after: &lower) }
        while upper > lower, isWhitespace(utf8[utf8.index(before: upper)]) { utf8.formIndex(before: &upper) }
        guard lower < upper else { return }
        // Sliced as scalars: the member may begin with a combining mark, and
        // a slice of the String itself would round its start down to the
        // comma's Character.
        body(Substring(value.unicodeScalars[lower..<upper]))
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
}
