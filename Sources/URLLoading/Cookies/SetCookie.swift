import Foundation

/// A `Set-Cookie` field value split into its name, value and attributes by
/// the parsing algorithm of RFC 6265bis §5.6, before the storage model
/// (`CookieJar`) decides whether and how to store it.
struct SetCookie: Sendable, Equatable {
    var name: String
    var value: String
    /// From the last valid Expires attribute, seconds since 1970.
    var expires: Double?
    /// From the last valid Max-Age attribute, in seconds (0 or less: already expired).
    var maxAge: Int64?
    /// From the last Domain attribute: lower case, leading dot removed; nil when absent.
    var domain: String?
    /// The last Domain attribute started with a dot (refused for IP addresses, as browsers do).
    var domainHadLeadingDot = false
    /// From the last Path attribute; nil when absent or not starting with `/`.
    var path: String?
    var isSecure = false
    var isHTTPOnly = false
    /// nil when the attribute is absent.
    var sameSite: Cookie.SameSite?

    /// Longest name plus value a cookie may have.
    static let maximumNameValueBytes = 4096
    /// Longest attribute value; longer attributes are ignored.
    static let maximumAttributeValueBytes = 1024

    /// Parses one field value; nil when RFC 6265bis says to ignore it
    /// entirely (control characters, no name and no value, too long).
    init?(_ field: some StringProtocol) {
        let bytes = Array(field.utf8)
        // Control characters other than HTAB make the whole string ignored.
        guard !bytes.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) else { return nil }
        let end = bytes.firstIndex(of: UInt8(ascii: ";")) ?? bytes.endIndex
        let pair = bytes[..<end]
        if let equals = pair.firstIndex(of: UInt8(ascii: "=")) {
            name = Self.trimmed(pair[..<equals])
            value = Self.trimmed(pair[(equals + 1)...])
        } else {
            name = ""
            value = Self.trimmed(pair)
        }
        guard !(name.isEmpty && value.isEmpty), name.utf8.count + value.utf8.count <= Self.maximumNameValueBytes else {
            return nil
        }
        var rest = bytes[end...]
        while let semicolon = rest.first, semicolon == UInt8(ascii: ";") {
            rest = rest.dropFirst()
            let next = rest.firstIndex(of: UInt8(ascii: ";")) ?? rest.endIndex
            let attribute = rest[..<next]
            rest = rest[next...]
            let attributeName: String
            let attributeValue: String
            if let equals = attribute.firstIndex(of: UInt8(ascii: "=")) {
                attributeName = Self.trimmed(attribute[..<equals])
                attributeValue = Self.trimmed(attribute[(equals + 1)...])
            } else {
                attributeName = Self.trimmed(attribute)
                attributeValue = ""
            }
            guard attributeValue.utf8.count <= Self.maximumAttributeValueBytes else { continue }
            apply(attributeName.lowercased(), attributeValue)
        }
    }

    private mutating func apply(_ name: String, _ value: String) {
        switch name {
        case "expires":
            if let date = CookieDate.parse(value) { expires = date }
        case "max-age":
            // A leading digit or "-", then digits only.
            let digits = value.hasPrefix("-") ? value.dropFirst() : Substring(value)
            guard !digits.isEmpty, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return }
            if value.hasPrefix("-") {
                maxAge = 0
            } else {
                // Values beyond Int64 are clamped by the 400-day cap anyway.
                maxAge = Int64(digits) ?? Int64.max
            }
        case "domain":
            // An empty value: ignore the attribute (6265bis §5.6.3 SHOULD).
            guard !value.isEmpty else { return }
            domainHadLeadingDot = value.hasPrefix(".")
            domain = (domainHadLeadingDot ? String(value.dropFirst()) : value).lowercased()
        case "path":
            path = value.hasPrefix("/") ? value : nil
        case "secure":
            isSecure = true
        case "httponly":
            isHTTPOnly = true
        case "samesite":
            switch value.lowercased() {
            case "none": sameSite = Cookie.SameSite.none
            case "lax": sameSite = .lax
            case "strict": sameSite = .strict
            default: sameSite = .unspecified
            }
        default:
            break
        }
    }

    /// The bytes without leading and trailing space and HTAB, as a string
    /// (invalid UTF-8 repaired, never refused).
    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> String {
        var slice = bytes
        while let first = slice.first, first == 0x20 || first == 0x09 { slice = slice.dropFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 { slice = slice.dropLast() }
        return String(decoding: slice, as: UTF8.self)
    }
}
