import Foundation

/// Ready-made route handlers for behaviour many tests need.
public enum Routes {
    /// A resource with validators: answers `304 Not Modified` when the
    /// request's `If-None-Match` lists `etag` (or is `*`), or when it has no
    /// `If-None-Match` and its `If-Modified-Since` equals `lastModified`;
    /// else `200` with `body` and the validators (RFC 9110 §13.1).
    public static func conditional(
        etag: String?, lastModified: String? = nil, body: [UInt8], headers: [HeaderField] = []
    ) -> TestOrigin.Handler {
        { request in
            var fields = headers
            if let etag { fields.append(HeaderField("ETag", etag)) }
            if let lastModified { fields.append(HeaderField("Last-Modified", lastModified)) }
            if let ifNoneMatch = request.header("If-None-Match") {
                let tags = ifNoneMatch.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                if let etag, tags.contains("*") || tags.contains(where: { weakCompare($0, etag) }) {
                    return ScriptedResponse(status: 304, headers: fields, framing: .none)
                }
            } else if let since = request.header("If-Modified-Since"), since == lastModified {
                return ScriptedResponse(status: 304, headers: fields, framing: .none)
            }
            return ScriptedResponse(status: 200, headers: fields, body: body)
        }
    }

    /// A resource behind HTTP Basic authentication (RFC 7617): 401 with a
    /// challenge for `realm` unless the request carries `user:password`.
    public static func basicAuth(
        realm: String, user: String, password: String, then response: ScriptedResponse
    ) -> TestOrigin.Handler {
        let expected = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        return { request in
            if request.header("Authorization") == expected { return response }
            return ScriptedResponse(
                status: 401, headers: [HeaderField("WWW-Authenticate", "Basic realm=\"\(realm)\", charset=\"UTF-8\"")],
                body: "authentication required\n")
        }
    }

    /// A redirect to `location` with `status`.
    public static func redirect(to location: String, status: Int = 302) -> TestOrigin.Handler {
        { _ in ScriptedResponse(status: status, headers: [HeaderField("Location", location)], body: "") }
    }

    /// Weak comparison of entity tags (RFC 9110 §8.8.3.2): equal opaque tags,
    /// whether or not either is weak.
    static func weakCompare(_ a: String, _ b: String) -> Bool {
        func opaque(_ tag: String) -> Substring { tag.hasPrefix("W/") ? tag.dropFirst(2) : Substring(tag) }
        return opaque(a) == opaque(b)
    }
}
