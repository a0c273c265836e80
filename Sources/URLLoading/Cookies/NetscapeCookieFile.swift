import Foundation

/// The Netscape `cookies.txt` format that curl (`-b`/`-c`) and wget
/// (`--load-cookies`/`--save-cookies`) read and write: one cookie per line,
/// seven fields separated by tabs:
///
///     domain  include-subdomains  path  secure  expires  name  value
///
/// `domain` starts with `.` for a domain cookie, `include-subdomains` and
/// `secure` are `TRUE`/`FALSE`, `expires` is seconds since 1970 (0 for a
/// session cookie). `#HttpOnly_` before the domain marks an HttpOnly
/// cookie; other lines starting with `#` and empty lines are comments.
enum NetscapeCookieFile {
    static let header = "# Netscape HTTP Cookie File\n# Written by URLLoading. Holds cookie values: keep it private.\n\n"

    static func serialize(_ cookies: [Cookie]) -> String {
        var text = header
        let sorted = cookies.sorted { ($0.canonicalDomain, $0.path, $0.name) < ($1.canonicalDomain, $1.path, $1.name) }
        for cookie in sorted {
            // Tabs, line breaks and other controls cannot be written; such cookies never come from Set-Cookie.
            guard !(cookie.name + cookie.value + cookie.path + cookie.canonicalDomain).unicodeScalars.contains(where: isUnwritable) else { continue }
            let domain = (cookie.isHTTPOnly ? "#HttpOnly_" : "") + (cookie.isHostOnly ? "" : ".") + cookie.canonicalDomain
            let expires = cookie.expiresDate.map { String(Int64(max(1, $0.timeIntervalSince1970.rounded(.down)))) } ?? "0"
            text +=
                [
                    domain, cookie.isHostOnly ? "FALSE" : "TRUE", cookie.path, cookie.isSecure ? "TRUE" : "FALSE",
                    expires, cookie.name, cookie.value,
                ].joined(separator: "\t") + "\n"
        }
        return text
    }

    /// Control characters (C0 but the tab separator, DEL, C1) and Unicode's
    /// line and paragraph separators: no field may hold one. A cookie with
    /// one could not be sent (a request carrying it is refused) nor written
    /// back as the same line; curl rejects such lines too.
    static func isUnwritable(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029
    }

    /// The cookies of a file, and how many non-comment lines were malformed.
    /// Lines and fields are split on bytes, never on characters: a tab
    /// followed by a combining mark is still a separator.
    static func parse(_ text: String, now: Date = Date()) -> (cookies: [Cookie], skipped: Int) {
        var cookies: [Cookie] = []
        var skipped = 0
        let httpOnlyPrefix = Array("#HttpOnly_".utf8)
        for rawLine in Array(text.utf8).split(omittingEmptySubsequences: true, whereSeparator: { $0 == 0x0A || $0 == 0x0D }) {
            var line = rawLine[...]
            var httpOnly = false
            if line.starts(with: httpOnlyPrefix) {
                httpOnly = true
                line = line.dropFirst(httpOnlyPrefix.count)
            } else if line.first == UInt8(ascii: "#") || line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) {
                continue
            }
            let fields = line.split(separator: 0x09, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
            // The value may be missing (curl writes an empty one as nothing after the tab).
            guard fields.count == 7 || fields.count == 6,
                !fields.contains(where: { $0.unicodeScalars.contains(where: isUnwritable) }),
                let expires = Int64(fields[4]),
                let subdomains = bool(fields[1]), let secure = bool(fields[3]), fields[2].hasPrefix("/")
            else {
                skipped += 1
                continue
            }
            let domain = fields[0].hasPrefix(".") ? fields[0].dropFirst() : fields[0][...]
            // A host name or address, in ASCII as hosts are stored, without
            // empty labels: anything else ("#...", "..", spaces, "%") is no
            // site, and would not be written back as the same line.
            guard !domain.isEmpty, !domain.hasPrefix("."), !domain.contains(".."), domain.utf8.allSatisfy(isHostByte) else {
                skipped += 1
                continue
            }
            cookies.append(
                Cookie(
                    name: fields[5], value: fields.count == 7 ? fields[6] : "", domain: String(domain),
                    isHostOnly: !subdomains, path: fields[2],
                    // A file may say any number: no cookie lives longer than RFC 6265bis allows.
                    expiresDate: expires == 0 ? nil : Date(timeIntervalSince1970: min(Double(expires), now.timeIntervalSince1970 + CookieJar.maximumLifetime)),
                    creationDate: now, isSecure: secure, isHTTPOnly: httpOnly))
        }
        return (cookies, skipped)
    }

    private static func isHostByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "["), UInt8(ascii: "]"): true
        default: false
        }
    }

    private static func bool(_ field: String) -> Bool? {
        switch field.uppercased() {
        case "TRUE": return true
        case "FALSE": return false
        default: return nil
        }
    }
}
