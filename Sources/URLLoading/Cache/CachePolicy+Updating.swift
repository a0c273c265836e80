package import Foundation

extension CachePolicy {
    /// Fields a 304 never changes in the stored response (RFC 9111 §3.2):
    /// the length of the stored body and the connection's own fields.
    static let fieldsNotUpdatedBy304: Set<String> = [
        "content-length", "connection", "keep-alive", "proxy-connection", "te", "transfer-encoding",
        "upgrade", "trailer", "proxy-authenticate", "proxy-authentication-info",
    ]

    /// Whether a 304 answers for the stored response (RFC 9111 §4.3.4):
    /// its entity tag, if it has one, must equal the stored one; else its
    /// Last-Modified, if it has one. A 304 without any validator selects the
    /// stored response only if that one has none either (servers must send
    /// the ETag they would send in a 200, RFC 9110 §15.4.5).
    package static func notModifiedSelects(_ entry: Entry, notModifiedHeaders: HeaderFields) -> Verdict {
        if let etag = notModifiedHeaders["ETag"] {
            guard let stored = entry.responseHeaders["ETag"], weakMatch(etag, stored) else {
                return .no("the 304's ETag \(etag) is not the stored one")
            }
            return .yes("the 304's ETag matches")
        }
        if let lastModified = notModifiedHeaders["Last-Modified"] {
            guard let stored = entry.responseHeaders["Last-Modified"],
                HTTPDate.parse(stored) == HTTPDate.parse(lastModified)
            else {
                return .no("the 304's Last-Modified is not the stored one")
            }
            return .yes("the 304's Last-Modified matches")
        }
        if entry.responseHeaders.contains("ETag") || entry.responseHeaders.contains("Last-Modified") {
            return .no("the 304 carries no validator while the stored response has one")
        }
        return .yes("neither the 304 nor the stored response carries a validator")
    }

    /// The stored response's header fields updated by a 304 (RFC 9111
    /// §3.2): each field the 304 carries replaces the stored lines of that
    /// name, except the fields of `fieldsNotUpdatedBy304` and those the
    /// 304's Connection names.
    package static func updatedHeaders(_ stored: HeaderFields, with notModified: HeaderFields) -> HeaderFields {
        let excluded = fieldsNotUpdatedBy304.union(namedByConnection(notModified))
        var result = stored
        var replaced: Set<String> = []
        for field in notModified {
            let name = field.name.lowercased()
            guard !excluded.contains(name) else { continue }
            if replaced.insert(name).inserted { result.remove(field.name) }
            result.append(field.name, field.value)
        }
        return result
    }

    /// Weak comparison of entity tags (RFC 9110 §8.8.3.2).
    package static func weakMatch(_ a: String, _ b: String) -> Bool {
        func opaque(_ tag: String) -> Substring {
            let trimmed = Substring(tag.trimmingCharacters(in: [" ", "\t"]))
            return trimmed.hasPrefix("W/") ? trimmed.dropFirst(2) : trimmed
        }
        return opaque(a) == opaque(b)
    }

    // MARK: Invalidation (RFC 9111 §4.4)

    /// The URLs whose stored responses a response to an unsafe method
    /// invalidates: the target URL, and Location / Content-Location when
    /// they are on the same origin, after a 2xx or 3xx.
    package static func invalidatedURLs(method: String, status: Int, url: URL, responseHeaders: HeaderFields) -> [URL] {
        guard !safeMethods.contains(method.uppercased()), (200..<400).contains(status) else { return [] }
        var urls = [url]
        for name in ["Location", "Content-Location"] {
            guard let value = responseHeaders[name], let target = URL(string: value, relativeTo: url)?.absoluteURL,
                sameOrigin(target, url)
            else { continue }
            urls.append(target)
        }
        return urls
    }

    static func sameOrigin(_ a: URL, _ b: URL) -> Bool {
        a.scheme?.lowercased() == b.scheme?.lowercased() && a.host?.lowercased() == b.host?.lowercased()
            && effectivePort(a) == effectivePort(b)
    }

    static func effectivePort(_ url: URL) -> Int? {
        url.port ?? (url.scheme?.lowercased() == "https" ? 443 : url.scheme?.lowercased() == "http" ? 80 : nil)
    }

    // MARK: Keys (RFC 9111 §2)

    /// Whether `text` is already in primary-key form: lowercase http(s)
    /// scheme and host, no user info, no default port, a path, no fragment.
    /// Most URLs are, and checking bytes costs far less than URLComponents.
    static func isNormalizedKey(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes -> Bool in
            // Byte by byte: `starts(with:)` over a String's UTF-8 view is generic and slow here.
            func hasPrefix(_ prefix: StaticString) -> Bool {
                guard bytes.count >= prefix.utf8CodeUnitCount else { return false }
                for offset in 0..<prefix.utf8CodeUnitCount where bytes[offset] != prefix.utf8Start[offset] { return false }
                return true
            }
            let https = hasPrefix("https://")
            guard https || hasPrefix("http://") else { return false }
            var index = https ? 8 : 7
            let hostStart = index
            var portStart = -1
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "/") { break }
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"):
                    break
                case UInt8(ascii: ":"):
                    guard portStart < 0 else { return false }
                    portStart = index
                default:
                    return false  // upper case, user info, IPv6, query or fragment right after the host
                }
                index += 1
            }
            guard index < bytes.count, index > hostStart, portStart != hostStart else { return false }
            if portStart >= 0 {
                let port = bytes[(portStart + 1)..<index]
                guard !port.isEmpty, port.first != UInt8(ascii: "0"),
                    !port.elementsEqual((https ? "443" : "80").utf8)
                else { return false }
            }
            return !bytes[index...].contains(UInt8(ascii: "#"))
        }
    }

    /// The host of a primary key (lowercase, without port).
    package static func host(ofKey key: String) -> String {
        // Over UTF-8 bytes: every delimiter is ASCII, and Foundation's `range(of:)` cost a store microseconds.
        let bytes = key.utf8
        var schemeEnd: String.UTF8View.Index?
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if bytes[index] == UInt8(ascii: ":"), bytes[index...].starts(with: "://".utf8) {
                schemeEnd = bytes.index(index, offsetBy: 3)
                break
            }
            index = bytes.index(after: index)
        }
        guard let schemeEnd else { return "" }
        let authority = bytes[schemeEnd...].prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") }
        if authority.first == UInt8(ascii: "[") {
            return String(decoding: authority.dropFirst().prefix { $0 != UInt8(ascii: "]") }, as: UTF8.self)
        }
        return String(decoding: authority.prefix { $0 != UInt8(ascii: ":") }, as: UTF8.self)
    }

    /// The primary cache key of a URL: scheme and host lowercased, default
    /// port and fragment removed, an empty path made "/", the query kept as
    /// sent. Nil for URLs that are not http or https.
    package static func primaryKey(_ url: URL) -> String? {
        let text = url.absoluteString
        if isNormalizedKey(text) { return text }
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true),
            let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = components.host, !host.isEmpty
        else { return nil }
        components.scheme = scheme
        components.host = host.lowercased()
        if components.port == (scheme == "https" ? 443 : 80) { components.port = nil }
        components.fragment = nil
        components.user = nil
        components.password = nil
        if components.percentEncodedPath.isEmpty { components.percentEncodedPath = "/" }
        return components.string
    }
}
