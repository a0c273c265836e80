import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// A server's or proxy's demand for credentials, as a delegate sees it
/// (Apple's `URLAuthenticationChallenge`).
public struct AuthenticationChallenge: Sendable, CustomStringConvertible {
    /// Where the credential would apply.
    public var protectionSpace: ProtectionSpace
    /// The credential the session would use: the one that just failed, else
    /// the store's default for the space.
    public var proposedCredential: Credential?
    /// How many times credentials for this space failed in this task.
    public var previousFailureCount: Int
    /// The 401 or 407 response that carried the challenge.
    public var failureResponse: HTTPURLResponse?
    /// The challenge as the server wrote it (scheme and parameters).
    public var serverChallenge: AuthChallenge?
    /// For a server-trust challenge: what the server showed.
    public var serverTrust: ServerTrust?

    /// A challenge.
    public init(
        protectionSpace: ProtectionSpace, proposedCredential: Credential?, previousFailureCount: Int,
        failureResponse: HTTPURLResponse?, serverChallenge: AuthChallenge?, serverTrust: ServerTrust? = nil
    ) {
        self.serverTrust = serverTrust
        self.protectionSpace = protectionSpace
        self.proposedCredential = proposedCredential
        self.previousFailureCount = previousFailureCount
        self.failureResponse = failureResponse
        self.serverChallenge = serverChallenge
    }

    /// The space and the failure count; never a credential's secret.
    public var description: String {
        "AuthenticationChallenge(\(protectionSpace), failures: \(previousFailureCount))"
    }
}
