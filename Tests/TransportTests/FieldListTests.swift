import Testing
@testable import Transport

/// List-valued header fields split by bytes (`FieldList`).
@Suite struct FieldListTests {
    func strings(_ value: String, quoted: Bool = false) -> [String] { FieldList.members(value, quoted: quoted).map(String.init) }

    @Test("Members are trimmed of SP and HTAB, empty ones ignored")
    func trimsAndSkipsEmpty() {
        #expect(strings(" gzip ,\tchunked\t") == ["gzip", "chunked"])
        #expect(strings(",, a ,,b,") == ["a", "b"])
        #expect(strings("") == [])
        #expect(strings(" \t , ") == [])
        // Only SP and HTAB are optional whitespace (RFC 9110 §5.6.3): a
        // no-break space stays part of the member.
        #expect(strings("chunked\u{A0}") == ["chunked\u{A0}"])
    }

    @Test("A comma followed by a combining mark still separates")
    func commaBeforeCombiningMark() {
        // ",\u{301}" is one Character: String.split(separator: ",") keeps
        // "a,\u{301}b" whole, where every byte-reading peer sees two members.
        #expect("a,\u{301}b".split(separator: ",").count == 1)
        #expect(strings("a,\u{301}b") == ["a", "\u{301}b"])
        #expect(FieldList.first("5,\u{301}6").map(String.init) == "5")
        #expect(FieldList.last("gzip,\u{301}x, chunked").map(String.init) == "chunked")
        #expect(FieldList.members("\u{301}").map(String.init) == ["\u{301}"])
    }

    @Test("Where the grammar has quoted strings, their commas (escapes included) do not separate; in a token list every comma does")
    func quotedStrings() {
        #expect(strings(#""a,b", W/"c,d""#, quoted: true) == [#""a,b""#, #"W/"c,d""#])
        #expect(strings(#"x="a\",b", y"#, quoted: true) == [#"x="a\",b""#, "y"])
        // An unclosed quote runs to the end of the line.
        #expect(strings(#"a, "b, c"#, quoted: true) == ["a", #""b, c"#])
        #expect(strings(#"a, "b\"#, quoted: true) == ["a", #""b\"#])
        // Vary, Connection, Content-Length: no member holds a comma.
        #expect(strings(#"a, "b, c"#) == ["a", #""b"#, "c"])
        #expect(FieldList.last(#"gzip;p="x,chunked""#, quoted: true).map(String.init) == #"gzip;p="x,chunked""#)
    }

    @Test("Lines combine as if joined by commas")
    func lines() {
        #expect(FieldList.members(["a, b", "", " c"]).map(String.init) == ["a", "b", "c"])
        #expect(FieldList.first(" , ") == nil)
        #expect(FieldList.last("") == nil)
    }
}
