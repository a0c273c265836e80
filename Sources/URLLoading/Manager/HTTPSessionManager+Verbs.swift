public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// Progress closures: called on the session's delegate context with the
/// task's `Progress` (completed and total unit counts are bytes).
public typealias ManagerProgress = @Sendable (Progress) -> Void
/// A failure closure: the task when one was made (nil when the request
/// could not be built), and why.
public typealias ManagerFailure = @Sendable (SessionTask?, ManagerError) -> Void

/// The verbs with success and failure closures (AFNetworking's
/// `GET:parameters:headers:progress:success:failure:` family). Each returns
/// the task it started, or nil when the request could not be built (the
/// failure closure then hears why, before anything is sent).
extension HTTPSessionManager {
    /// A request of any method whose response `serializer` reads.
    @discardableResult
    public func dataTask<S: ResponseSerializer>(
        _ method: HTTPMethod, _ path: String, parameters: [String: any Sendable]? = nil, headers: [String: String] = [:], serializer: S,
        uploadProgress: ManagerProgress? = nil, downloadProgress: ManagerProgress? = nil,
        success: (@Sendable (SessionTask, S.Output) -> Void)?, failure: ManagerFailure?
    ) -> SessionTask? {
        let request: URLRequest
        do throws(ManagerError) {
            request = try requestSerializer.request(method, url: try url(path), parameters: parameters, headers: headers)
        } catch {
            failure?(nil, error)
            return nil
        }
        return dataTask(request, serializer: serializer, uploadProgress: uploadProgress, downloadProgress: downloadProgress, success: success, failure: failure)
    }

    /// A request built elsewhere, read by `serializer`.
    @discardableResult
    public func dataTask<S: ResponseSerializer>(
        _ request: URLRequest, serializer: S, uploadProgress: ManagerProgress? = nil, downloadProgress: ManagerProgress? = nil,
        success: (@Sendable (SessionTask, S.Output) -> Void)?, failure: ManagerFailure?
    ) -> SessionTask {
        let handler = TaskHandler(upload: uploadProgress, download: downloadProgress) { task, outcome in
            Self.finish(serializer, task: task, outcome: outcome, success: success, failure: failure)
        }
        return start(makeDataTask(request, wantsProgress: uploadProgress != nil || downloadProgress != nil), handler: handler)
    }

    /// GET, the response read as JSON by `responseSerializer`.
    @discardableResult
    public func get(
        _ path: String, parameters: [String: any Sendable]? = nil, headers: [String: String] = [:], progress: ManagerProgress? = nil,
        success: (@Sendable (SessionTask, JSONValue) -> Void)?, failure: ManagerFailure?
    ) -> SessionTask? {
        dataTask(.get, path, parameters: parameters, headers: headers, serializer: responseSerializer, downloadProgress: progress, success: success, failure: failure)
    }

    /// HEAD: success has no body to read.
    @discardableResult
    public func head(
        _ path: String, parameters: [String: any Sendable]? = nil, headers: [String: String] = [:], success: (@Sendable (SessionTask) -> Void)?,
        failure: ManagerFailure?
    ) -> SessionTask? {
        let validation = responseSerializer.validation
        var done: (@Sendable (SessionTask, Data) -> Void)?
        if let success { done = { task, _ in success(task) } }
        return dataTask(
            .head, path, parameters: parameters, headers: headers, serializer: DataResponseSerializer(validation: ResponseValidation(acceptableStatusCodes: validation.acceptableStatusCodes)),
            success: done, failure: failure)
    }

    /// POST with the parameters as the request serializer says.
    @discardableResult
    public func post(
        _ path: String, parameters: [String: any Sendable]? = nil, headers: [String: String] = [:], progress: ManagerProgress? = nil,
        success: (@Sendable (SessionTask, JSONValue) -> Void)?, failure: ManagerFailure?
    ) -> SessionTask? {
        dataTask(.post, path, parameters: parameters, headers: headers, serializer: responseSerializer, uploadProgress: progress, success: success, failure: failure)
    }

    /// PUT with the parameters as the request serializer says.
    @discardableResult
    public func put(
        _ path: String, parameters: [String: any Sendable]? = nil, headers: [String: String] = [:], success: (@Sendable (SessionTask, JSONValue) -> Void)?,
        failure: ManagerFailure?
    ) -> SessionTask? {
        dataTask(.put, path, parameters: parameters, headers: headers, serializer: responseSerializer, success: success, failure: failure)
    }

    /// PATCH with the parameters as the request serializer says.
    @discardableResult
    public func patch(
        _ path: String, parameters: [String: any Sendable]? = nil, headers: [String: String] = [:], success: (@Sendable (SessionTask, JSONValue) -> Void)?,
        failure: ManagerFailure?
    ) -> SessionTask? {
        dataTask(.patch, path, parameters: parameters, headers: headers, serializer: responseSerializer, success: success, failure: failure)
    }

    /// DELETE, its parameters in the query.
    @discardableResult
    public func delete(
        _ path: String, parameters: [String: any Sendable]? = nil, headers: [String: String] = [:], success: (@Sendable (SessionTask, JSONValue) -> Void)?,
        failure: ManagerFailure?
    ) -> SessionTask? {
        dataTask(.delete, path, parameters: parameters, headers: headers, serializer: responseSerializer, success: success, failure: failure)
    }

    /// POST of a `multipart/form-data` body built in `constructingBody`
    /// (AFNetworking's `constructingBodyWithBlock:`): parameters first as text
    /// fields, then the parts the closure appends; the body is written to a
    /// temporary file and streamed from it, so large files cost little memory.
    @discardableResult
    public func post(
        _ path: String, parameters: [String: any Sendable]? = nil, headers: [String: String] = [:],
        constructingBody: (inout MultipartFormData) throws -> Void, progress: ManagerProgress? = nil,
        success: (@Sendable (SessionTask, JSONValue) -> Void)?, failure: ManagerFailure?
    ) -> SessionTask? {
        let request: URLRequest
        let body: URL
        do {
            var form = MultipartFormData()
            if let parameters {
                for field in RequestSerializer.fields(try RequestSerializer.values(parameters)) {
                    form.append(field.value ?? "", name: field.name)
                }
            }
            try constructingBody(&form)
            var built = requestSerializer.base(.post, url: try url(path), headers: headers)
            built.setValue(form.contentType, forHTTPHeaderField: "Content-Type")
            request = built
            body = try form.writeBody()
        } catch let error as ManagerError {
            failure?(nil, error)
            return nil
        } catch {
            failure?(nil, ManagerError(.parameterEncodingFailed, message: "the multipart body cannot be built: \(error)", underlying: error))
            return nil
        }
        let serializer = responseSerializer
        let handler = TaskHandler(upload: progress, download: nil) { task, outcome in
            try? FileManager.default.removeItem(at: body)
            Self.finish(serializer, task: task, outcome: outcome, success: success, failure: failure)
        }
        return start({ $0.uploadTask(with: request, fromFile: body) }, handler: handler)
    }

    // MARK: Uploads and downloads

    /// An upload of `data` (or of a file, with `fromFile`) read by `serializer`.
    @discardableResult
    public func upload<S: ResponseSerializer>(
        _ request: URLRequest, from data: Data? = nil, fromFile file: URL? = nil, serializer: S, progress: ManagerProgress? = nil,
        success: (@Sendable (SessionTask, S.Output) -> Void)?, failure: ManagerFailure?
    ) -> SessionTask {
        let handler = TaskHandler(upload: progress, download: nil) { task, outcome in
            Self.finish(serializer, task: task, outcome: outcome, success: success, failure: failure)
        }
        return start(
            { session in
                if let file { return session.uploadTask(with: request, fromFile: file) }
                if let data { return session.uploadTask(with: request, from: data) }
                // A request with an httpBodyStream streams it.
                return session.uploadTask(withStreamedRequest: request)
            }, handler: handler)
    }

    /// A download; `destination` says where the file goes (it is moved
    /// there, folders made, a file there replaced). The completion gets the
    /// file's final URL, or the error (with resume data in its
    /// `underlying` URLError when the session left some).
    @discardableResult
    public func download(
        _ request: URLRequest, resumeData: Data? = nil, progress: ManagerProgress? = nil,
        destination: @escaping @Sendable (_ temporary: URL, _ response: HTTPURLResponse?) -> URL,
        completion: @escaping @Sendable (SessionTask, Result<(URL, HTTPURLResponse), ManagerError>) -> Void
    ) -> SessionTask {
        let validation = responseSerializer.validation
        let handler = TaskHandler(upload: nil, download: progress, destination: destination) { task, outcome in
            completion(task, Self.downloaded(outcome, validation: ResponseValidation(acceptableStatusCodes: validation.acceptableStatusCodes)))
        }
        return start({ session in resumeData.map { session.downloadTask(withResumeData: $0) } ?? session.downloadTask(with: request) }, handler: handler)
    }

    static func downloaded(_ outcome: TaskHandler.Outcome, validation: ResponseValidation) -> Result<(URL, HTTPURLResponse), ManagerError> {
        if let error = outcome.error { return .failure(error) }
        guard let response = outcome.response, let file = outcome.file else {
            return .failure(ManagerError(.transport, message: "the download ended without a file", response: outcome.response))
        }
        do throws(ManagerError) {
            try validation.validate(response, data: nil)
        } catch {
            return .failure(error)
        }
        return .success((file, response))
    }
}
