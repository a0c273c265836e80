public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// An HTTP method (RFC 9110 §9), by name.
public struct HTTPMethod: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String
    /// A method by its name, as written (methods are case-sensitive).
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let get = HTTPMethod(rawValue: "GET")
    public static let head = HTTPMethod(rawValue: "HEAD")
    public static let post = HTTPMethod(rawValue: "POST")
    public static let put = HTTPMethod(rawValue: "PUT")
    public static let patch = HTTPMethod(rawValue: "PATCH")
    public static let delete = HTTPMethod(rawValue: "DELETE")

    public var description: String { rawValue }
}

/// Builds a manager's requests (AFNetworking's
/// `AFHTTPRequestSerializer` family): the URL, the default header fields,
/// and the parameters as a query string, a form body or JSON.
///
/// Parameters are a dictionary whose values are strings, numbers, Booleans,
/// `nil`s (`NSNull`), arrays and dictionaries of those, or `JSONValue`s.
/// Nested values are written as AFNetworking writes them: `a[b]=1`,
/// `a[]=1&a[]=2`, keys sorted. Anything else fails with
/// `.parameterEncodingFailed` before a byte is sent.
public struct RequestSerializer: Sendable {
    /// Where parameters go for methods not in `queryMethods`.
    public enum Encoding: Sendable, Equatable {
        /// `application/x-www-form-urlencoded` (the default).
        case form
        /// `application/json`, the dictionary as a JSON object.
        case json
        /// In the URL's query, whatever the method.
        case query
    }

    /// Where parameters go for methods outside `queryMethods`.
    public var encoding: Encoding
    /// Methods whose parameters always go in the query (GET, HEAD, DELETE).
    public var queryMethods: Set<HTTPMethod> = [.get, .head, .delete]
    /// Header fields every request carries unless the call gives its own.
    public var headers: [String: String] = [:]
    /// The request timeout (`URLRequest.timeoutInterval`).
    public var timeoutInterval: TimeInterval = 60
    /// The request cache policy.
    public var cachePolicy: URLRequest.CachePolicy = .useProtocolCachePolicy
    /// The encoder for `Encodable` JSON bodies.
    public var jsonEncoder: @Sendable () -> JSONEncoder = { JSONEncoder() }

    /// A serializer putting parameters where `encoding` says.
    public init(encoding: Encoding = .form) {
        self.encoding = encoding
    }

    /// A request for `method` at `url` with `parameters`.
    public func request(
        _ method: HTTPMethod, url: URL, parameters: [String: any Sendable]?, headers extra: [String: String] = [:]
    ) throws(ManagerError) -> URLRequest {
        var request = base(method, url: url, headers: extra)
        guard let parameters, !parameters.isEmpty else { return request }
        let values = try Self.values(parameters)
        if queryMethods.contains(method) || encoding == .query {
            try Self.appendQuery(Self.queryString(values), to: &request)
            return request
        }
        switch encoding {
        case .form, .query:
            setIfAbsent(&request, "Content-Type", "application/x-www-form-urlencoded")
            request.httpBody = Data(Self.queryString(values).utf8)
        case .json:
            setIfAbsent(&request, "Content-Type", "application/json")
            do {
                request.httpBody = try JSONValue.object(values).encoded()
            } catch {
                throw ManagerError(.parameterEncodingFailed, message: "the parameters cannot be written as JSON: \(error)", underlying: error)
            }
        }
        return request
    }

    /// A request whose body is `body` as JSON, from any `Encodable`.
    public func request(
        _ method: HTTPMethod, url: URL, json body: some Encodable & Sendable, headers extra: [String: String] = [:]
    ) throws(ManagerError) -> URLRequest {
        var request = base(method, url: url, headers: extra)
        setIfAbsent(&request, "Content-Type", "application/json")
        do {
            request.httpBody = try jsonEncoder().encode(body)
        } catch {
            throw ManagerError(.parameterEncodingFailed, message: "the body cannot be encoded as JSON: \(error)", underlying: error)
        }
        return request
    }

    /// The request without parameters: method, default and given fields.
    func base(_ method: HTTPMethod, url: URL, headers extra: [String: String]) -> URLRequest {
        var request = URLRequest(url: url, cachePolicy: cachePolicy, timeoutInterval: timeoutInterval)
        request.httpMethod = method.rawValue
        for (name, value) in headers where extra.keys.first(where: { $0.caseInsensitiveCompare(name) == .orderedSame }) == nil {
            request.setValue(value, forHTTPHeaderField: name)
        }
        for (name, value) in extra { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    private func setIfAbsent(_ request: inout URLRequest, _ name: String, _ value: String) {
        if request.value(forHTTPHeaderField: name) == nil { request.setValue(value, forHTTPHeaderField: name) }
    }

    // MARK: Values

    /// The parameters as JSON values, or the first one that cannot be.
    static func values(_ parameters: [String: any Sendable]) throws(ManagerError) -> [String: JSONValue] {
        var result: [String: JSONValue] = [:]
        for (key, value) in parameters { result[key] = try self.value(value, path: key) }
        return result
    }

    static func value(_ value: Any, path: String) throws(ManagerError) -> JSONValue {
        switch value {
        case let json as JSONValue: return json
        case let text as String: return .string(text)
        case let text as Substring: return .string(String(text))
        case let flag as Bool: return .bool(flag)
        case let number as Int: return .number(Double(number))
        case let number as Int64: return .number(Double(number))
        case let number as Int32: return .number(Double(number))
        case let number as UInt: return .number(Double(number))
        case let number as Double:
            guard number.isFinite else { throw unsupported(path, "a number that is not finite") }
            return .number(number)
        case let number as Float:
            guard number.isFinite else { throw unsupported(path, "a number that is not finite") }
            return .number(Double(number))
        case is NSNull: return .null
        case let array as [Any]:
            var elements: [JSONValue] = []
            for (index, element) in array.enumerated() { elements.append(try self.value(element, path: "\(path)[\(index)]")) }
            return .array(elements)
        case let dictionary as [String: Any]:
            var members: [String: JSONValue] = [:]
            for (key, element) in dictionary { members[key] = try self.value(element, path: "\(path)[\(key)]") }
            return .object(members)
        default:
            // An Optional in the dictionary: nil is null, else what it wraps.
            let mirror = Mirror(reflecting: value)
            if mirror.displayStyle == .optional {
                guard let wrapped = mirror.children.first?.value else { return .null }
                return try self.value(wrapped, path: path)
            }
            throw unsupported(path, "a value of type \(type(of: value))")
        }
    }

    private static func unsupported(_ path: String, _ what: String) -> ManagerError {
        ManagerError(
            .parameterEncodingFailed,
            message: "parameter \"\(path)\" is \(what): parameters are strings, numbers, Booleans, nulls, arrays and dictionaries")
    }

    // MARK: Query strings

    /// `key=value` pairs joined by `&`, keys sorted, nested as AFNetworking
    /// writes them; Booleans as 1 and 0; numbers without a needless `.0`.
    static func queryString(_ values: [String: JSONValue]) -> String {
        fields(values).map { field in field.value.map { escape(field.name) + "=" + escape($0) } ?? escape(field.name) }.joined(separator: "&")
    }

    /// The parameters as flat name-value fields, in query order, unescaped
    /// (the query string and a multipart form's text fields both use them);
    /// a null has no value.
    static func fields(_ values: [String: JSONValue]) -> [(name: String, value: String?)] {
        var fields: [(name: String, value: String?)] = []
        for key in values.keys.sorted() {
            if let value = values[key] { append(value, key: key, to: &fields) }
        }
        return fields
    }

    private static func append(_ value: JSONValue, key: String, to fields: inout [(name: String, value: String?)]) {
        switch value {
        case .object(let members):
            for name in members.keys.sorted() {
                if let member = members[name] { append(member, key: "\(key)[\(name)]", to: &fields) }
            }
        case .array(let elements):
            for element in elements { append(element, key: "\(key)[]", to: &fields) }
        case .null:
            fields.append((key, nil))
        case .bool(let flag):
            fields.append((key, flag ? "1" : "0"))
        case .number(let number):
            fields.append((key, number.rounded() == number && abs(number) < 1e15 ? String(Int64(number)) : String(number)))
        case .string(let text):
            fields.append((key, text))
        }
    }

    /// RFC 3986's unreserved characters: everything else is percent-encoded.
    private static let unreserved: CharacterSet = {
        var allowed = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: Unicode.Scalar(0)...Unicode.Scalar(0x7F)))
        allowed.insert(charactersIn: "-._~")
        return allowed
    }()

    /// RFC 3986 unreserved characters stay; everything else is percent-encoded
    /// (so `&`, `=`, `+`, `[` and `]` in a value never change its meaning).
    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    static func appendQuery(_ query: String, to request: inout URLRequest) throws(ManagerError) {
        guard !query.isEmpty else { return }
        guard let url = request.url, var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
            throw ManagerError(.parameterEncodingFailed, message: "the URL cannot take a query")
        }
        let existing = components.percentEncodedQuery.map { $0.isEmpty ? "" : $0 + "&" } ?? ""
        components.percentEncodedQuery = existing + query
        guard let joined = components.url else { throw ManagerError(.parameterEncodingFailed, message: "the URL cannot take a query") }
        request.url = joined
    }
}
