import Testing
@testable import URLLoading

/// Content-Length values read from the network: RFC 9110 §8.6, checked
/// before any arithmetic.
@Suite struct FieldNumberTests {
    @Test("RFC 9110 §8.6: digits, with spaces or tabs around them, are the length")
    func digits() {
        #expect(FieldNumber.length("1024") == 1024)
        #expect(FieldNumber.length("0") == 0)
        #expect(FieldNumber.length("  1024\t") == 1024)
        #expect(FieldNumber.length("0001024") == 1024)
        #expect(FieldNumber.length("9007199254740992") == FieldNumber.maximumLength)
    }

    @Test("RFC 9110 §8.6: a list of equal members is one length; members that differ are no length")
    func lists() {
        #expect(FieldNumber.length("1024, 1024") == 1024)
        #expect(FieldNumber.length("1024,1024 ,\t1024") == 1024)
        #expect(FieldNumber.length("1024, 1025") == nil)
        #expect(FieldNumber.length("1024,") == nil)
        #expect(FieldNumber.length(",1024") == nil)
        #expect(FieldNumber.length("1024,,1024") == nil)
    }

    @Test("Malformed, signed, fractional, spaced-out or empty values are no length")
    func malformed() {
        for text in ["", " ", "abc", "-1", "+5", "1.5", "1 024", "10 24", "1024x", "0x400", "１０２４", "1024;", "\u{0}1"] {
            #expect(FieldNumber.length(text) == nil, "\(text.debugDescription)")
        }
    }

    @Test("A hostile length is refused before it can overflow: over 2^53, or over 16 digits")
    func huge() {
        #expect(FieldNumber.length("9007199254740993") == nil)
        #expect(FieldNumber.length("9999999999999999") == nil)
        #expect(FieldNumber.length("00000000000000001") == nil)
        #expect(FieldNumber.length("99999999999999999999999999999999") == nil)
        #expect(FieldNumber.length("1024, 99999999999999999999") == nil)
    }
}
