public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// What an interceptor does with a request.
public enum InterceptorResult: Sendable {
    /// Go on, with this (possibly changed) request.
    case proceed(URLRequest)
    /// Answer without the network.
    case respond(HTTPURLResponse, Data)
    /// Fail the task with this error.
    case fail(SessionError)
}

/// Serves or changes requests before the network: the Swift-native form of
/// a `URLProtocol` class (`SessionConfiguration.protocolClasses`), used by
/// tests and for local resources. Interceptors are consulted before the
/// classes.
public protocol Interceptor: Sendable {
    /// Decides what happens to `request`.
    func intercept(_ request: URLRequest) async -> InterceptorResult
}
