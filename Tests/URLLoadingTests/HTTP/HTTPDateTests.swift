import Testing
@testable import URLLoading

/// HTTP dates: RFC 9110 §5.6.7.
@Suite struct HTTPDateTests {
    static let sunday1994 = 784_111_777.0  // Sun, 06 Nov 1994 08:49:37 GMT

    @Test("RFC 9110 §5.6.7: the three formats give the same instant")
    func threeFormats() {
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == Self.sunday1994)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT", now: 1_735_689_600) == Self.sunday1994)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == Self.sunday1994)
        #expect(HTTPDate.parse("Sun Nov 16 08:49:37 1994") == Self.sunday1994 + 10 * 86_400)
    }

    @Test("RFC 9110 §5.6.7: IMF-fixdate is formatted exactly")
    func formatting() {
        #expect(HTTPDate.format(Self.sunday1994) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(2_147_483_648) == "Tue, 19 Jan 2038 03:14:08 GMT")
        for seconds in stride(from: -1_000_000_000.0, to: 10_000_000_000, by: 123_456_789) {
            #expect(HTTPDate.parse(HTTPDate.format(seconds)) == seconds)
        }
    }

    @Test("RFC 9110 §5.6.7: a two-digit year more than 50 years ahead is in the past")
    func rfc850Century() {
        let now2026 = 1_795_000_000.0
        #expect(HTTPDate.parse("Thursday, 18-Aug-50 02:01:18 GMT", now: now2026).map(HTTPDate.format) == "Thu, 18 Aug 2050 02:01:18 GMT")
        #expect(HTTPDate.parse("Friday, 18-Aug-95 02:01:18 GMT", now: now2026).map(HTTPDate.format) == "Fri, 18 Aug 1995 02:01:18 GMT")
    }

    @Test("Names in any case are accepted, as browsers do")
    func caseInsensitiveNames() {
        #expect(HTTPDate.parse("THU, 18 Aug 2050 02:01:18 GMT") != nil)
        #expect(HTTPDate.parse("Thu, 18 AUG 2050 02:01:18 gMT") != nil)
        #expect(HTTPDate.parse("  Thu, 18 Aug 2050 02:01:18 GMT\t") != nil)
    }

    @Test(
        "RFC 9110 §5.6.7: values outside the grammar are invalid",
        arguments: [
            "Thu, 18 Aug 2050 02:01:18 UTC", "Thu, 18 Aug 2050 02:01:18 AEST", "Thu, 18 Aug 50 02:01:18 GMT",
            "Thu 18 Aug 2050 02:01:18 GMT", "Thu, 18  Aug  2050 02:01:18 GMT", "Thu, 18-Aug-2050 02:01:18 GMT",
            "Thu, 18 Aug 2050 02.01.18 GMT", "Thu, 18 Aug 2050 2:01:18 GMT", "Thu, 31 Feb 2050 02:01:18 GMT",
            "Thu, 18 Aug 2050 24:01:18 GMT", "now", "", "0", "Thu, 18 Aug 2050 02:01:18 GMT junk",
            "\u{0}\u{1}\u{ff}", "Thu, 1\u{0}8 Aug 2050 02:01:18 GMT",
        ])
    func invalidValues(text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }

    @Test("Parsing never traps on arbitrary bytes")
    func totalOnRandomInput() {
        // Seeded: a failure names an input that fails again.
        var generator = SplitMix64(seed: 0x5EED_CAFE)
        let alphabet = Array("Sun, 06 Nov 1994 08:49:37 GMT-:0123456789\u{0}\u{7f}é ".unicodeScalars)
        var parsed = 0
        for _ in 0..<2000 {
            let length = Int.random(in: 0...40, using: &generator)
            let text = String(String.UnicodeScalarView((0..<length).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] }))
            // Whatever parses prints as a date that parses to the same instant.
            if let seconds = HTTPDate.parse(text) {
                parsed += 1
                #expect(HTTPDate.parse(HTTPDate.format(seconds)) == seconds.rounded(.down), "\(text.debugDescription)")
            }
        }
        // Round trips of real dates from 1970 to 9999.
        for _ in 0..<2000 {
            let seconds = Double(Int64.random(in: 0...253_402_300_799, using: &generator))
            #expect(HTTPDate.parse(HTTPDate.format(seconds)) == seconds, "\(seconds)")
        }
        #expect(parsed < 2000, "random junk should mostly not parse")
    }
}

/// A small seeded generator (SplitMix64), so random tests repeat.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
