package import Foundation

/// URLs as the cache keeps and shows them: stored without the
/// password of their user info (the key never had user info), and shown by
/// tools with the values of query parameters whose names mark secrets
/// replaced by `…`.
public enum CachedURL {
    /// `url` as the cache stores it: no password.
    package static func stored(_ url: URL) -> String {
        guard url.password(percentEncoded: true) != nil,
            var components = URLComponents(url: url, resolvingAgainstBaseURL: true)
        else { return url.absoluteString }
        components.password = nil
        return components.string ?? url.absoluteString
    }

    /// Parts of query parameter names that mark their values as secrets.
    static let secretNameParts = ["token", "key", "secret", "pass", "pwd", "sig", "auth", "code", "session", "credential", "jwt", "sid"]

    /// Whether a query parameter's name marks its value as a secret.
    static func isSecretName(_ name: String) -> Bool {
        let lowered = name.lowercased()
        return secretNameParts.contains { lowered.contains($0) }
    }

    /// A stored URL as tools may print it: no password (an older store may
    /// hold one), and secret query values as `…`.
    @_spi(Tools) public static func displayed(_ text: String) -> String {
        // Without "@" there is no user info, without "?" no query: nothing to
        // hide, and no URL to parse (a snapshot of a memory hit costs 1 µs).
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "@") || $0 == UInt8(ascii: "?") }) else { return text }
        guard let url = URL(string: text), var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
            return text.contains("@") || text.contains("?") ? "<unparsable URL>" : text
        }
        var changed = false
        if components.password != nil {
            components.password = nil
            changed = true
        }
        if let query = components.percentEncodedQuery {
            let members = query.split(separator: "&", omittingEmptySubsequences: false).map { member -> String in
                guard let equals = member.firstIndex(of: "=") else { return String(member) }
                let name = String(member[..<equals])
                guard isSecretName(name.removingPercentEncoding ?? name) else { return String(member) }
                changed = true
                return name + "=%E2%80%A6"
            }
            if changed { components.percentEncodedQuery = members.joined(separator: "&") }
        }
        guard changed else { return text }
        // "…" is not a query character URLComponents accepts as encoded: put it in after.
        return (components.string ?? text).replacingOccurrences(of: "=%E2%80%A6", with: "=…")
    }
}
