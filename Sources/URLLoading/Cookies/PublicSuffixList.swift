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
    /// Rules without wildcard or exception, ASCII, lower case.
    private let exact: Set<String>
    /// `*.ck` is stored as `ck`: every child of it is a public suffix.
    private let wildcards: Set<String>
    /// `!www.ck` is stored as `www.ck`: not a public suffix despite a wildcard.
    private let exceptions: Set<String>
    /// False for the stand-in used when the system's list cannot be read:
    /// without it nobody can tell `co.uk` from `example.com`, so the cookie
    /// store keeps Domain cookies host-only (safe) instead of trusting the
    /// top-level domains alone.
    public let isAvailable: Bool

    /// Where Debian's `publicsuffix` package puts the list.
    public static let systemListPath = "/usr/share/publicsuffix/public_suffix_list.dat"

    /// The system's list, read once per process. When the file is missing
    /// or unreadable, a stand-in that is not `isAvailable` is used and a
    /// warning is logged once: cookies still work, but a Domain attribute
    /// makes a cookie host-only rather than shared with a domain that may
    /// be a public suffix.
    public static let system: PublicSuffixList = {
        do {
            return try PublicSuffixList(contentsOf: URL(fileURLWithPath: systemListPath))
        } catch {
            Logger(label: "urlloading.cookies").warning(
                "public suffix list unavailable; cookies with a Domain attribute are kept host-only (install Debian's publicsuffix package)",
                metadata: ["path": "\(systemListPath)", "error": "\(error)"])
            return PublicSuffixList.unavailable
        }
    }()

    /// Reads a list in the publicsuffix.org format.
    ///
    /// - Throws: The file system's error when the file cannot be read.
    public init(contentsOf url: URL) throws {
        let data = try Data(contentsOf: url)
        self.init(rules: String(decoding: data, as: UTF8.self))
    }

    /// Parses a list in the publicsuffix.org format: one rule per line,
    /// `//` comments, `*.` wildcards and `!` exceptions.
    public init(rules text: String) {
        var exact = Set<String>()
        var wildcards = Set<String>()
        var exceptions = Set<String>()
        for line in text.split(whereSeparator: \.isNewline) {
            // A rule is the line up to its first white space.
            guard let rule = line.split(whereSeparator: \.isWhitespace).first, !rule.hasPrefix("//") else { continue }
            if rule.hasPrefix("!") {
                exceptions.insert(Self.ascii(String(rule.dropFirst())))
            } else if rule.hasPrefix("*.") {
                wildcards.insert(Self.ascii(String(rule.dropFirst(2))))
            } else {
                exact.insert(Self.ascii(String(rule)))
            }
        }
        self.exact = exact
        self.wildcards = wildcards
        self.exceptions = exceptions
        self.isAvailable = true
    }

    private init(unavailable: Void) {
        exact = []
        wildcards = []
        exceptions = []
        isAvailable = false
    }

    /// The stand-in for a list that could not be read (see `isAvailable`).
    public static let unavailable = PublicSuffixList(unavailable: ())

    /// The number of rules, for diagnostics.
    public var ruleCount: Int { exact.count + wildcards.count + exceptions.count }

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
        var longest = 1  // the implicit rule "*"
        for start in 0..<n {
            let suffix = asciiLabels[start...].joined(separator: ".")
            if exceptions.contains(suffix) {
                // An exception rule prevails: the suffix is the rule minus its first label.
                return (labels, n - start - 1)
            }
            if longest < n - start {
                if exact.contains(suffix) {
                    longest = n - start
                } else if start + 1 < n, wildcards.contains(asciiLabels[(start + 1)...].joined(separator: ".")) {
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
