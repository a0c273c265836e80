// Code written for apple/swift-http-types (`HTTPRequest`, `HTTPResponse`,
// `HTTPFields`) gets those types with `import URLLoading`, as it would with
// `import HTTPTypesFoundation` on Apple's platforms.
@_exported public import HTTPTypes
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Transport

extension HTTPResponse {
    /// The response as the transport read it: fields in the order they
    /// came, repeated fields (each `Set-Cookie`) kept apart, the reason
    /// phrase as sent. A field whose name is no HTTP token is left out; nil
    /// for a status outside 0...999 (a head from another process or a
    /// URLProtocol class, which the parser's checks did not see).
    init?(_ head: ResponseHead) {
        guard (0...999).contains(head.status) else { return nil }
        var fields = HTTPFields()
        fields.reserveCapacity(head.headers.count)
        for field in head.headers {
            guard let name = HTTPField.Name(field.name) else { continue }
            fields.append(HTTPField(name: name, value: field.value))
        }
        self.init(status: Status(code: head.status, reasonPhrase: head.reasonPhrase), headerFields: fields)
    }

    /// A response that only exists as Foundation's (the cache's memory tier
    /// and interceptors serve those): its fields one per name, sorted by
    /// name, since `allHeaderFields` kept no order; no reason phrase.
    init?(bridging response: HTTPURLResponse) {
        guard (0...999).contains(response.statusCode) else { return nil }
        var fields = HTTPFields()
        let pairs = response.allHeaderFields.compactMap { key, value -> (String, String)? in
            guard let key = key as? String, let value = value as? String else { return nil }
            return (key, value)
        }
        for (key, value) in pairs.sorted(by: { $0.0 < $1.0 }) {
            guard let name = HTTPField.Name(key) else { continue }
            fields.append(HTTPField(name: name, value: value))
        }
        self.init(status: Status(code: response.statusCode), headerFields: fields)
    }
}

extension HTTPRequest {
    /// The request as the engine takes it. Fields of one name become one
    /// (joined with "; " for `Cookie`, else ", ", RFC 9110 §5.3), as
    /// `URLRequest` holds one value per name.
    ///
    /// - Throws: `badURL` without a scheme or an authority, or when the
    ///   authority or the path holds a space or a control byte
    ///   (`HTTPRequest` takes them as given; they would change the request
    ///   line). The message names no part of the URL: it may hold secrets.
    func urlRequest() throws(SessionError) -> URLRequest {
        guard let scheme, !scheme.isEmpty, let authority, !authority.isEmpty else {
            throw SessionError(.badURL, failingURL: nil, message: "an HTTPRequest needs a scheme and an authority")
        }
        func clean(_ part: String) -> Bool { part.utf8.allSatisfy { $0 > 0x20 && $0 != 0x7F } }
        guard clean(authority), path.map(clean) ?? true else {
            throw SessionError(.badURL, failingURL: nil, message: "the request's authority or path holds a space or a control character")
        }
        guard let url = joinedURL(scheme: scheme, authority: authority) else {
            throw SessionError(.badURL, failingURL: nil, message: "the request's scheme, authority and path make no URL")
        }
        var request = URLRequest(url: url)
        // GET is URLRequest's own; its setter costs microseconds (NSURLRequest's copy).
        if method != .get { request.httpMethod = method.rawValue }
        var joined: [(name: HTTPField.Name, value: String)] = []
        for field in headerFields {
            if let index = joined.firstIndex(where: { $0.name == field.name }) {
                joined[index].value += (field.name == .cookie ? "; " : ", ") + field.value
            } else {
                joined.append((field.name, field.value))
            }
        }
        for field in joined { request.setValue(field.value, forHTTPHeaderField: field.name.rawName) }
        return request
    }
}

extension HTTPRequest {
    /// `url`'s answer, the fields joined in one string of its final size:
    /// swift-http-types' getter copies each field and the whole into arrays
    /// first (four allocations of a GET's seventy).
    fileprivate func joinedURL(scheme: String, authority: String) -> URL? {
        guard let path, !(method == .connect && extendedConnectProtocol == nil), !(method == .options && path == "*") else {
            return nil
        }
        var text = ""
        text.reserveCapacity(scheme.utf8.count + 3 + authority.utf8.count + path.utf8.count)
        text += scheme
        text += "://"
        text += authority
        text += path
        return URL(string: text)
    }
}

extension URLRequest {
    /// The request as swift-http-types' type (fields one per name, sorted
    /// by name, as `URLRequest` kept no order); nil without a URL or with a
    /// method that is no HTTP token.
    var fieldsRequest: HTTPRequest? {
        guard let url, let method = HTTPRequest.Method(httpMethod ?? "GET") else { return nil }
        var request = HTTPRequest(method: method, url: url)
        for (key, value) in (allHTTPHeaderFields ?? [:]).sorted(by: { $0.key < $1.key }) {
            guard let name = HTTPField.Name(key) else { continue }
            request.headerFields.append(HTTPField(name: name, value: value))
        }
        return request
    }
}
