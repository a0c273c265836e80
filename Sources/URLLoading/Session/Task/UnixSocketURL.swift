import Foundation

/// URLs of servers on a Unix-domain socket, in AsyncHTTPClient's form:
/// `http+unix://` or `https+unix://`, the socket's path percent-encoded as
/// the host (`http+unix://%2Fvar%2Frun%2Fdocker.sock/v1.43/info`). The
/// path stands in the host's place everywhere a host counts (the cache's
/// keys, cookies, credentials); the transfer goes to `localhost` over
/// the socket.
enum UnixSocketURL {
    /// The longest path a socket address holds (`sun_path`, less its NUL).
    static let maximumPathBytes = 107

    /// Whether `scheme` (lower case) names a server on a socket.
    static func isUnixScheme(_ scheme: String) -> Bool {
        scheme == "http+unix" || scheme == "https+unix"
    }

    /// Why `path` cannot name a socket, or nil when it can.
    static func problem(with path: String) -> String? {
        guard path.hasPrefix("/"), !path.utf8.contains(0), path.utf8.count <= maximumPathBytes else {
            return "a Unix socket's path must be absolute, without NUL, of at most \(maximumPathBytes) bytes"
        }
        return nil
    }

    /// The socket's path and the URL libcurl is given (the plain scheme,
    /// `localhost`, the path and query as they are written).
    ///
    /// - Returns: `badURL` for a path that is not absolute, holds a NUL or
    ///   is longer than a socket address holds.
    static func split(_ url: URL) -> Result<(socketPath: String, transferURL: String), SessionError> {
        guard let scheme = url.scheme?.lowercased(), isUnixScheme(scheme), let path = url.host(percentEncoded: false) else {
            return .failure(SessionError(.badURL, failingURL: url, message: "a Unix-socket URL needs the socket's path as its host"))
        }
        if let problem = problem(with: path) { return .failure(SessionError(.badURL, failingURL: url, message: problem)) }
        let text = url.absoluteString
        guard let schemeEnd = text.range(of: "://") else {
            return .failure(SessionError(.badURL, failingURL: url, message: "a Unix-socket URL needs an authority"))
        }
        let afterAuthority = text[schemeEnd.upperBound...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? text.endIndex
        var rest = String(text[afterAuthority...])
        if let fragment = rest.firstIndex(of: "#") { rest = String(rest[..<fragment]) }
        if !rest.hasPrefix("/") { rest = "/" + rest }
        let plain = scheme == "https+unix" ? "https" : "http"
        return .success((path, "\(plain)://localhost\(rest)"))
    }
}
