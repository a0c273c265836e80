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
        let sorted = cookies.sorted { ($0.domain, $0.path, $0.name) < ($1.domain, $1.path, $1.name) }
        for cookie in sorted {
            // Tabs and line breaks cannot be written; such cookies never come from Set-Cookie.
            guard !(cookie.name + cookie.value + cookie.path).contains(where: { $0 == "\t" || $0.isNewline }) else { continue }
            let domain = (cookie.isHTTPOnly ? "#HttpOnly_" : "") + (cookie.isHostOnly ? "" : ".") + cookie.domain
            let expires = cookie.expiresDate.map { String(Int64(max(1, $0.timeIntervalSince1970.rounded(.down)))) } ?? "0"
            text += [
                domain, cookie.isHostOnly ? "FALSE" : "TRUE", cookie.path, cookie.isSecure ? "TRUE" : "FALSE",
                expires, cookie.name, cookie.value,
            ].joined(separator: "\t") + "\n"
        }
        return text
    }

    /// The cookies of a file, and how many non-comment lines were malformed.
    static func parse(_ text: String, now: Date = Date()) -> (cookies: [Cookie], skipped: Int) {
        var cookies: [Cookie] = []
        var skipped = 0
        for rawLine in text.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }) {
            var line = Substring(rawLine)
            var httpOnly = false
            if line.hasPrefix("#HttpOnly_") {
                httpOnly = true
                line = line.dropFirst("#HttpOnly_".count)
            } else if line.hasPrefix("#") || line.allSatisfy(\.isWhitespace) {
                continue
            }
            // Control characters (NUL, vertical tab, DEL, ...) make no cookie:
            // one could not be sent (a request carrying it is refused) nor
            // written back. curl rejects such lines too.
            guard !line.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F }) else {
                skipped += 1
                continue
            }
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            // The value may be missing (curl writes an empty one as nothing after the tab).
            guard fields.count == 7 || fields.count == 6,
                  let expires = Int64(fields[4]), !fields[0].isEmpty,
                  let subdomains = bool(fields[1]), let secure = bool(fields[3]), fields[2].hasPrefix("/")
            else {
                skipped += 1
                continue
            }
            let domain = fields[0].hasPrefix(".") ? fields[0].dropFirst() : fields[0]
            guard !domain.isEmpty else {
                skipped += 1
                continue
            }
            cookies.append(Cookie(
                name: String(fields[5]), value: fields.count == 7 ? String(fields[6]) : "", domain: String(domain),
                isHostOnly: !subdomains, path: String(fields[2]),
                // A file may say any number: no cookie lives longer than RFC 6265bis allows.
                expiresDate: expires == 0 ? nil : Date(timeIntervalSince1970: min(Double(expires), now.timeIntervalSince1970 + CookieJar.maximumLifetime)),
                creationDate: now, isSecure: secure, isHTTPOnly: httpOnly))
        }
        return (cookies, skipped)
    }

    private static func bool(_ field: Substring) -> Bool? {
        switch field.uppercased() {
        case "TRUE": return true
        case "FALSE": return false
        default: return nil
        }
    }
}
