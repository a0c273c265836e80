public import Foundation
import Logging

/// The Public Suffix List (publicsuffix.org): which domains are public
/// suffixes ("com", "co.uk", "github.io") under which anyone may register
/// names, so that a cookie's Domain attribute may never name one.
///
/// The list is read from a maintained file, not compiled in: by default
/// Debian's `publicsuffix` package, `/usr/share/publicsuffix/public_suffix_list.dat`,
/// which the system's updates keep current. Both the ICANN and the private
/// sections count, as in browsers. Rules in Unicode are matched in their
/// ASCII (punycode) form, so hosts may be given in either form.
public struct PublicSuffixList: Sendable {
    /// The parsed rules; the system's list is read when first asked.
    private let origin: Origin

    private enum Origin: Sendable {
        case rules(Rules)
        case system
    }

    private struct Rules: Sendable {
        /// Rules without wildcard or exception, ASCII, lower case.
        var exact = Set<String>()
        /// `*.ck` is stored as `ck`: every child of it is a public suffix.
        var wildcards = Set<String>()
        /// `!www.ck` is stored as `www.ck`: not a public suffix despite a wildcard.
        var exceptions = Set<String>()
        var isAvailable = true
    }

    private var rules: Rules {
        switch origin {
        case .rules(let rules): rules
        case .system: Self.systemRules
        }
    }

    /// False for the stand-in used when the system's list cannot be read:
    /// without it nobody can tell `co.uk` from `example.com`, so the cookie
    /// store keeps Domain cookies host-only (safe) instead of trusting the
    /// top-level domains alone.
    public var isAvailable: Bool { rules.isAvailable }

    /// Where Debian's `publicsuffix` package puts the list.
    public static let systemListPath = "/usr/share/publicsuffix/public_suffix_list.dat"

    /// The system's list, read once per process when a rule is first
    /// needed (a cookie store made at start-up costs nothing until a
    /// cookie names a host). When the file is missing or unreadable, a
    /// stand-in that is not `isAvailable` is used and a warning is logged
    /// once: cookies still work, but a Domain attribute makes a cookie
    /// host-only rather than shared with a domain that may be a public suffix.
    public static let system = PublicSuffixList(origin: .system)

    private static let systemRules: Rules = {
        do {
            return try PublicSuffixList(contentsOf: URL(fileURLWithPath: systemListPath)).rules
        } catch {
            Logger(label: "urlloading.cookies").warning(
                "public suffix list unavailable; cookies with a Domain attribute are kept host-only (install Debian's publicsuffix package)",
                metadata: ["path": "\(systemListPath)", "error": "\(error)"])
            return Rules(isAvailable: false)
        }
    }()

    private init(origin: Origin) {
        self.origin = origin
    }

    /// Reads a list in the publicsuffix.org format.
    ///
    /// - Throws: The file system's error when the file cannot be read.
    public init(contentsOf url: URL) throws {
        let data = try Data(contentsOf: url)
        self.init(origin: .rules(Self.parse(data)))
    }

    /// Parses a list in the publicsuffix.org format: one rule per line,
    /// `//` comments, `*.` wildcards and `!` exceptions.
    public init(rules text: String) {
        self.init(origin: .rules(Self.parse(Data(text.utf8))))
    }

    /// A rule is a line's text up to its first white space. ASCII lines
    /// (nearly all of the list) are read as bytes; a line with other bytes
    /// is read as characters, whose white space and line breaks include
    /// Unicode's.
    private static func parse(_ data: Data) -> Rules {
        var rules = Rules()
        func add(_ rule: Substring) {
            guard !rule.hasPrefix("//") else { return }
            if rule.hasPrefix("!") {
                rules.exceptions.insert(ascii(String(rule.dropFirst())))
            } else if rule.hasPrefix("*.") {
                rules.wildcards.insert(ascii(String(rule.dropFirst(2))))
            } else {
                rules.exact.insert(ascii(String(rule)))
            }
        }
        let bytes = [UInt8](data)
        var start = 0
        while start < bytes.count {
            var end = start
            var plain = true
            // \n, \v, \f and \r end a line, as `Character.isNewline` says.
            while end < bytes.count, !(0x0A...0x0D).contains(bytes[end]) {
                if bytes[end] >= 0x80 { plain = false }
                end += 1
            }
            if !plain {
                let line = String(decoding: bytes[start..<end], as: UTF8.self)
                for part in line.split(whereSeparator: \.isNewline) {
                    if let rule = part.split(whereSeparator: \.isWhitespace).first { add(rule) }
                }
            } else {
                var first = start
                while first < end, bytes[first] == 0x20 || bytes[first] == 0x09 { first += 1 }
                var last = first
                while last < end, bytes[last] != 0x20, bytes[last] != 0x09 { last += 1 }
                if first < last { add(Substring(String(decoding: bytes[first..<last], as: UTF8.self))) }
            }
            start = end + 1
        }
        return rules
    }

    /// The stand-in for a list that could not be read (see `isAvailable`).
    public static let unavailable = PublicSuffixList(origin: .rules(Rules(isAvailable: false)))

    /// The number of rules, for diagnostics.
    public var ruleCount: Int {
        let rules = rules
        return rules.exact.count + rules.wildcards.count + rules.exceptions.count
    }

    /// The public suffix of a host name, in the form it was given (lower
    /// case); nil for an empty name, one starting or ending with a dot, or
    /// one with an empty label.
    public func publicSuffix(of host: String) -> String? {
        guard let (labels, count) = suffixLabelCount(host) else { return nil }
        return labels.suffix(count).joined(separator: ".")
    }

    /// The registrable domain ("eTLD+1") of a host name, in the form it was
    /// given (lower case): the public suffix and one more label. Nil when
    /// the name is itself a public suffix or is malformed.
    public func registrableDomain(of host: String) -> String? {
        guard let (labels, count) = suffixLabelCount(host), labels.count > count else { return nil }
        return labels.suffix(count + 1).joined(separator: ".")
    }

    /// Whether `domain` is a public suffix.
    public func isPublicSuffix(_ domain: String) -> Bool {
        guard let (labels, count) = suffixLabelCount(domain) else { return false }
        return labels.count == count
    }

    /// The host's labels as given (lower case) and how many of the last
    /// ones form its public suffix.
    private func suffixLabelCount(_ host: String) -> ([Substring], Int)? {
        let given = host.lowercased()
        let labels = given.split(separator: ".", omittingEmptySubsequences: false)
        guard !given.isEmpty, !labels.contains(where: \.isEmpty) else { return nil }
        let asciiLabels = Self.ascii(given).split(separator: ".", omittingEmptySubsequences: false)
        // Conversion to ASCII never changes the number of labels of a valid name.
        guard asciiLabels.count == labels.count else { return nil }
        let n = asciiLabels.count
        let rules = rules
        var longest = 1  // the implicit rule "*"
        for start in 0..<n {
            let suffix = asciiLabels[start...].joined(separator: ".")
            if rules.exceptions.contains(suffix) {
                // An exception rule prevails: the suffix is the rule minus its first label.
                return (labels, n - start - 1)
            }
            if longest < n - start {
                if rules.exact.contains(suffix) {
                    longest = n - start
                } else if start + 1 < n, rules.wildcards.contains(asciiLabels[(start + 1)...].joined(separator: ".")) {
                    longest = n - start
                }
            }
        }
        return (labels, longest)
    }

    /// A domain name in ASCII form: lower case, Unicode labels in punycode
    /// (by Foundation's IDNA conversion, the same one `URL.host` applies).
    static func ascii(_ domain: String) -> String {
        if domain.utf8.allSatisfy({ $0 < 0x80 }) { return domain.lowercased() }
        if let host = URL(string: "http://\(domain)/")?.host, !host.isEmpty {
            return host.lowercased()
        }
        return domain.lowercased()
    }
}
