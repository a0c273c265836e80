import Testing
@testable import URLLoading

/// Cache-Control parsing: RFC 9111 §5.2 and §1.2.2 (delta-seconds).
@Suite struct CacheControlTests {
    @Test("RFC 9111 §5.2: names are case-insensitive; arguments are tokens or quoted strings")
    func grammar() {
        let control = CacheControl(#"Max-Age=60, NO-CACHE, private="set-cookie, x", ext="a\"b""#)
        #expect(control.maxAge == .valid(60))
        #expect(control.noCache)
        #expect(control.first("private")?.argument == "set-cookie, x")
        #expect(control.first("ext")?.argument == "a\"b")
        #expect(control.directives.count == 4)
    }

    @Test("RFC 9111 §5.2: a comma inside a quoted string does not split directives")
    func quotedCommas() {
        let control = CacheControl(#"extension="max-age=3600", max-age=1"#)
        #expect(control.maxAge == .valid(1))
        let reversed = CacheControl(#"max-age=1, extension="max-age=3600""#)
        #expect(reversed.maxAge == .valid(1))
    }

    @Test("RFC 9111 §4.2.1: the first of duplicated directives counts, across lines too")
    func duplicates() {
        #expect(CacheControl("max-age=1800, max-age=1").maxAge == .valid(1800))
        #expect(CacheControl(["max-age=1", "max-age=1800"]).maxAge == .valid(1))
    }

    @Test(
        "RFC 9111 §1.2.2: delta-seconds",
        arguments: [
            ("max-age=003600", CacheControl.Seconds.valid(3600)),
            ("max-age=\"3600\"", .valid(3600)),
            ("max-age=3600.5", .valid(3600)),
            ("max-age='3600'", .invalid),
            ("max-age =3600", .invalid),
            ("max-age= 3600", .invalid),
            ("max-age=a3600", .invalid),
            ("max-age", .invalid),
            ("max-age=", .invalid),
            ("max-age=99999999999999999999", .valid(2_147_483_648)),
            ("no-cache", .absent),
        ])
    func deltaSeconds(value: String, expected: CacheControl.Seconds) {
        #expect(CacheControl(value).maxAge == expected)
    }

    @Test("RFC 9111 §5.2.1.2: max-stale with and without a limit")
    func maxStale() {
        #expect(CacheControl("max-stale").maxStale == .unlimited)
        #expect(CacheControl("max-stale=30").maxStale == .limit(30))
        #expect(CacheControl("max-stale=x").maxStale == .invalid)
        #expect(CacheControl("").maxStale == .absent)
    }

    @Test(
        "Parsing never traps, and skips what it cannot read",
        arguments: [
            ("", CacheControl.Seconds.absent), (",,,", .absent), ("=", .absent), ("\"", .absent),
            ("\"unterminated, max-age=5", .absent), ("max-age=5, \"junk\", no-store", .valid(5)), ("a=\"\\", .absent),
            ("\u{0}max-age=1", .absent), ("max-age=\"7\"", .valid(7)), ("max-age=-1", .invalid), ("max-age=1x", .valid(1)),
            ("MAX-AGE=3", .valid(3)), ("max-age=99999999999999999999", .valid(CacheControl.maximumSeconds)),
        ])
    func malformed(value: String, maxAge: CacheControl.Seconds) {
        #expect(CacheControl(value).maxAge == maxAge, "\(value.debugDescription)")
    }

    @Test("A directive after junk is still read")
    func recoversAfterJunk() {
        #expect(CacheControl("max-age=5, \"junk\", no-store").noStore)
        #expect(CacheControl("@@@, no-store").noStore)
    }
}
