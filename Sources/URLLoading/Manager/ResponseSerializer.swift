public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// What a response must be to count as a success: its status
/// code and its media type. A failure carries the response and its body.
public struct ResponseValidation: Sendable {
    /// Accepted status codes (200–299 by default).
    public var acceptableStatusCodes: IndexSet = IndexSet(integersIn: 200..<300)
    /// Accepted media types (`application/json`, `text/*`, `*/*`); nil
    /// accepts any, and a response without a body is never refused for its type.
    public var acceptableContentTypes: Set<String>?

    /// A validation of status codes and, when given, media types.
    public init(acceptableStatusCodes: IndexSet = IndexSet(integersIn: 200..<300), acceptableContentTypes: Set<String>? = nil) {
        self.acceptableStatusCodes = acceptableStatusCodes
        self.acceptableContentTypes = acceptableContentTypes
    }

    /// Throws when the response is not acceptable.
    public func validate(_ response: HTTPURLResponse, data: Data?) throws(ManagerError) {
        guard acceptableStatusCodes.contains(response.statusCode) else {
            throw ManagerError(
                .unacceptableStatusCode(response.statusCode), message: "the server answered \(response.statusCode)", response: response, data: data)
        }
        guard let accepted = acceptableContentTypes, !(data ?? Data()).isEmpty else { return }
        let type = response.value(forHTTPHeaderField: "Content-Type").map(Self.mediaType)
        guard let type, accepted.contains(where: { Self.matches(type, $0) }) else {
            throw ManagerError(
                .unacceptableContentType(type), message: "the response's media type \(type ?? "(none)") is not one of \(accepted.sorted())",
                response: response, data: data)
        }
    }

    /// `type/subtype` of a Content-Type value, lower case, without parameters.
    static func mediaType(_ value: String) -> String {
        value.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
    }

    static func matches(_ type: String, _ pattern: String) -> Bool {
        let pattern = pattern.lowercased()
        if pattern == "*/*" || pattern == type { return true }
        guard pattern.hasSuffix("/*") else { return false }
        return type.hasPrefix(pattern.dropLast())
    }
}

/// Turns a response and its body into a value (AFNetworking's
/// `AFURLResponseSerialization`): validation first, then the reading.
public protocol ResponseSerializer: Sendable {
    /// What a response becomes.
    associatedtype Output: Sendable
    /// The checks before reading.
    var validation: ResponseValidation { get }
    /// Reads a validated response's body. `data` is empty for a body-less
    /// answer (204, 205, 304, a HEAD request).
    func read(_ data: Data, response: HTTPURLResponse, request: URLRequest?) throws(ManagerError) -> Output
}

extension ResponseSerializer {
    /// Validates, then reads (a failure carries the response and the body).
    public func serialize(_ data: Data?, response: HTTPURLResponse, request: URLRequest?) throws(ManagerError) -> Output {
        try validation.validate(response, data: data)
        return try read(data ?? Data(), response: response, request: request)
    }

    /// A status or method that has no body to read (RFC 9110 §6.4.1).
    static func hasNoBody(_ response: HTTPURLResponse, _ request: URLRequest?, _ data: Data) -> Bool {
        data.isEmpty && ([204, 205, 304].contains(response.statusCode) || request?.httpMethod == "HEAD")
    }
}

/// The body as it came.
public struct DataResponseSerializer: ResponseSerializer {
    public var validation: ResponseValidation
    /// Bytes, validated by `validation`.
    public init(validation: ResponseValidation = ResponseValidation()) { self.validation = validation }
    public func read(_ data: Data, response: HTTPURLResponse, request: URLRequest?) throws(ManagerError) -> Data { data }
}

/// The body as text, in the charset its Content-Type names (UTF-8 when
/// none, ISO-8859-1 and US-ASCII understood), else a failure.
public struct StringResponseSerializer: ResponseSerializer {
    public var validation: ResponseValidation
    /// Text, validated by `validation`.
    public init(validation: ResponseValidation = ResponseValidation()) { self.validation = validation }

    public func read(_ data: Data, response: HTTPURLResponse, request: URLRequest?) throws(ManagerError) -> String {
        let charset = Self.charset(response.value(forHTTPHeaderField: "Content-Type"))
        let encoding: String.Encoding
        switch charset {
        case nil, "utf-8", "utf8": encoding = .utf8
        case "iso-8859-1", "latin1", "iso_8859-1": encoding = .isoLatin1
        case "us-ascii", "ascii": encoding = .ascii
        case "utf-16": encoding = .utf16
        case .some(let other):
            throw ManagerError(.serializationFailed, message: "the body's charset \(other) is not one this reads", response: response, data: data)
        }
        guard let text = String(data: data, encoding: encoding) else {
            throw ManagerError(.serializationFailed, message: "the body is not text in \(charset ?? "utf-8")", response: response, data: data)
        }
        return text
    }

    /// The charset parameter of a Content-Type value, lower case.
    static func charset(_ value: String?) -> String? {
        guard let value else { return nil }
        for parameter in value.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if pair.count == 2, pair[0].lowercased() == "charset" { return pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")).lowercased() }
        }
        return nil
    }
}

/// The body as a JSON document; `.null` for a body-less answer.
public struct JSONResponseSerializer: ResponseSerializer {
    public var validation: ResponseValidation
    /// JSON, validated by `validation` (by default also its media type:
    /// `application/json`, `text/json`, `text/javascript`, `*/*+json`).
    public init(validation: ResponseValidation = ResponseValidation(acceptableContentTypes: JSONResponseSerializer.contentTypes)) {
        self.validation = validation
    }

    /// The media types AFNetworking's JSON serializer accepts, and `+json` types.
    public static let contentTypes: Set<String> = ["application/json", "text/json", "text/javascript", "application/problem+json"]

    public func read(_ data: Data, response: HTTPURLResponse, request: URLRequest?) throws(ManagerError) -> JSONValue {
        if Self.hasNoBody(response, request, data) { return .null }
        do {
            return try JSONValue(data: data)
        } catch {
            throw ManagerError(.serializationFailed, message: "the body is not JSON: \(error)", response: response, data: data, underlying: error)
        }
    }
}

/// The body decoded as `Value` with a `JSONDecoder`. A body-less answer
/// decodes only into a type that accepts JSON `null` (an Optional).
public struct DecodableResponseSerializer<Value: Decodable & Sendable>: ResponseSerializer {
    public var validation: ResponseValidation
    /// Makes the decoder (a new one per response: decoders are not Sendable).
    public var decoder: @Sendable () -> JSONDecoder

    /// `Value`s, validated by `validation`.
    public init(_ type: Value.Type = Value.self, validation: ResponseValidation = ResponseValidation(), decoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }) {
        self.validation = validation
        self.decoder = decoder
    }

    public func read(_ data: Data, response: HTTPURLResponse, request: URLRequest?) throws(ManagerError) -> Value {
        let body = Self.hasNoBody(response, request, data) ? Data("null".utf8) : data
        do {
            return try decoder().decode(Value.self, from: body)
        } catch {
            throw ManagerError(
                .serializationFailed, message: "the body is not a \(Value.self): \(error)", response: response, data: data, underlying: error)
        }
    }
}
