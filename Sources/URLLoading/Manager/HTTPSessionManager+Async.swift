public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// A response read by a serializer, with what came with it.
public struct ManagerResponse<Value: Sendable>: Sendable {
    /// What the serializer made of the body.
    public var value: Value
    /// The response.
    public var response: HTTPURLResponse
    /// The body as it came.
    public var data: Data
}

/// The verbs in `async` form. Cancelling the calling Swift task
/// cancels the request.
extension HTTPSessionManager {
    /// A request whose response `serializer` reads.
    public func request<S: ResponseSerializer>(
        _ method: HTTPMethod, _ path: String, parameters: [String: any Sendable]? = nil, headers: [String: String] = [:], serializer: S,
        uploadProgress: ManagerProgress? = nil, downloadProgress: ManagerProgress? = nil
    ) async throws(ManagerError) -> ManagerResponse<S.Output> {
        let built = try requestSerializer.request(method, url: try url(path), parameters: parameters, headers: headers)
        return try await perform(built, serializer: serializer, uploadProgress: uploadProgress, downloadProgress: downloadProgress)
    }

    /// A request built elsewhere (`requestSerializer.request(_:url:json:)`
    /// for an `Encodable` body), through the adapter and the retrier.
    public func perform<S: ResponseSerializer>(
        _ request: URLRequest, serializer: S, uploadProgress: ManagerProgress? = nil, downloadProgress: ManagerProgress? = nil
    ) async throws(ManagerError) -> ManagerResponse<S.Output> {
        try await intercepted(request, serializer: serializer, uploadProgress: uploadProgress, downloadProgress: downloadProgress).get()
    }

    /// One try.
    func once<S: ResponseSerializer>(
        _ request: URLRequest, serializer: S, uploadProgress: ManagerProgress?, downloadProgress: ManagerProgress?
    ) async -> Result<ManagerResponse<S.Output>, ManagerError> {
        let box = TaskBox()
        let result: Result<ManagerResponse<S.Output>, ManagerError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let handler = TaskHandler(upload: uploadProgress, download: downloadProgress) { task, outcome in
                    switch Self.result(serializer, request: request, outcome: outcome) {
                    case .success(let value):
                        if let response = outcome.response {
                            continuation.resume(returning: .success(ManagerResponse(value: value, response: response, data: outcome.data)))
                        } else {
                            continuation.resume(returning: .failure(ManagerError(.transport, message: "the task ended without a response")))
                        }
                    case .failure(let error):
                        continuation.resume(returning: .failure(error))
                    }
                }
                box.set(start(makeDataTask(request, wantsProgress: uploadProgress != nil || downloadProgress != nil), handler: handler))
            }
        } onCancel: {
            box.cancel()
        }
        return result
    }

    /// GET, the body decoded as `type` (validated for 2xx).
    public func get<Value: Decodable & Sendable>(
        _ path: String, parameters: [String: any Sendable]? = nil, headers: [String: String] = [:], as type: Value.Type,
        decoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }
    ) async throws(ManagerError) -> Value {
        try await request(.get, path, parameters: parameters, headers: headers, serializer: DecodableResponseSerializer(type, decoder: decoder)).value
    }

    /// GET, the body as JSON.
    public func get(_ path: String, parameters: [String: any Sendable]? = nil, headers: [String: String] = [:]) async throws(ManagerError) -> JSONValue {
        try await request(.get, path, parameters: parameters, headers: headers, serializer: responseSerializer).value
    }

    /// Any method with the parameters as the request serializer says, the
    /// body decoded as `type`.
    public func send<Value: Decodable & Sendable>(
        _ method: HTTPMethod, _ path: String, parameters: [String: any Sendable]? = nil, headers: [String: String] = [:], as type: Value.Type,
        decoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }
    ) async throws(ManagerError) -> Value {
        try await request(method, path, parameters: parameters, headers: headers, serializer: DecodableResponseSerializer(type, decoder: decoder)).value
    }

    /// Any method with an `Encodable` body as JSON, the answer decoded as `type`.
    public func send<Body: Encodable & Sendable, Value: Decodable & Sendable>(
        _ method: HTTPMethod, _ path: String, json body: Body, headers: [String: String] = [:], as type: Value.Type,
        decoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }
    ) async throws(ManagerError) -> Value {
        let built = try requestSerializer.request(method, url: try url(path), json: body, headers: headers)
        return try await perform(built, serializer: DecodableResponseSerializer(type, decoder: decoder)).value
    }

    /// A download moved to `destination`; returns its final URL and the response.
    public func download(
        _ path: String, parameters: [String: any Sendable]? = nil, headers: [String: String] = [:], progress: ManagerProgress? = nil,
        destination: @escaping @Sendable (_ temporary: URL, _ response: HTTPURLResponse?) -> URL
    ) async throws(ManagerError) -> (URL, HTTPURLResponse) {
        let built = try requestSerializer.request(.get, url: try url(path), parameters: parameters, headers: headers)
        let box = TaskBox()
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                box.set(download(built, progress: progress, destination: destination) { _, result in continuation.resume(returning: result) })
            }
        } onCancel: {
            box.cancel()
        }
        return try result.get()
    }
}
