import Foundation
import Testing
import URLLoading

/// How a list in the publicsuffix.org format is read: a rule is a line's
/// text up to its first white space; `//` starts a comment line.
@Suite struct PublicSuffixListTests {
    @Test("Rules, comments, wildcards and exceptions; CRLF and form-feed line ends; leading white space; text after a rule ignored")
    func lineForms() {
        let list = PublicSuffixList(
            rules: "// a comment\r\ncom\r\n  co.uk   trailing words\n\t*.ck\u{0C}!www.ck\u{0B}//*.example\nUPPER.Test\n\n")
        #expect(list.ruleCount == 5)
        #expect(list.isPublicSuffix("com"))
        #expect(list.isPublicSuffix("co.uk"))
        #expect(list.registrableDomain(of: "bbc.co.uk") == "bbc.co.uk")
        #expect(list.isPublicSuffix("anything.ck"))
        #expect(!list.isPublicSuffix("www.ck"))
        #expect(list.registrableDomain(of: "www.ck") == "www.ck")
        // Rules are kept in lower case; hosts match in any case.
        #expect(list.isPublicSuffix("upper.test"))
        #expect(list.registrableDomain(of: "Site.UPPER.test") == "site.upper.test")
        // The commented-out rule is no rule: "example" falls back to the implicit "*".
        #expect(list.registrableDomain(of: "a.b.example") == "b.example")
    }

    @Test("Rules in Unicode are kept in their ASCII form; Unicode white space and line separators end a rule as ASCII ones do")
    func unicodeLines() {
        let list = PublicSuffixList(rules: "рф\u{2028}个人.香港\u{00A0}comment\n*.クラウド\n")
        #expect(list.ruleCount == 3)
        #expect(list.isPublicSuffix("xn--p1ai"))
        #expect(list.isPublicSuffix("рф"))
        #expect(list.registrableDomain(of: "пример.рф") == "пример.рф")
        #expect(list.isPublicSuffix("个人.香港"))
        #expect(list.isPublicSuffix("x.クラウド"))
    }

    @Test("The system list answers as a list read from its file does")
    func systemList() throws {
        let path = PublicSuffixList.systemListPath
        guard FileManager.default.isReadableFile(atPath: path) else {
            #expect(!PublicSuffixList.system.isAvailable)
            return
        }
        let read = try PublicSuffixList(contentsOf: URL(fileURLWithPath: path))
        #expect(PublicSuffixList.system.isAvailable)
        #expect(PublicSuffixList.system.ruleCount == read.ruleCount)
        #expect(read.ruleCount > 5_000)
        for host in ["www.example.co.uk", "a.b.github.io", "city.kawasaki.jp", "x.y.kawasaki.jp", "example.com"] {
            #expect(PublicSuffixList.system.registrableDomain(of: host) == read.registrableDomain(of: host))
        }
    }
}
