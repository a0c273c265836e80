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

/// How a delegate answers a challenge (Apple's `URLSession.AuthChallengeDisposition`, SPEC A3).
public enum AuthChallengeDisposition: Sendable, Hashable {
    /// Use the credential given with it; nil sends the request on without
    /// one, so the 401 or 407 becomes the task's response.
    case useCredential
    /// As if the delegate had no challenge method: the store's default
    /// credential for the space, else the URL's user and password, else
    /// the 401 or 407 is the task's response.
    case performDefaultHandling
    /// The task fails with `.userCancelledAuthentication`.
    case cancelAuthenticationChallenge
    /// Skip this space: the next challenge the server offered is tried; when
    /// none is left, the 401 or 407 is the task's response.
    case rejectProtectionSpace
}

/// A delegate's answer: a disposition and, for `.useCredential`, the credential.
public struct ChallengeAnswer: Sendable {
    /// The disposition.
    public var disposition: AuthChallengeDisposition
    /// The credential to use with `.useCredential`.
    public var credential: Credential?

    /// An answer.
    public init(_ disposition: AuthChallengeDisposition, _ credential: Credential? = nil) {
        self.disposition = disposition
        self.credential = credential
    }

    /// Use `credential`.
    public static func use(_ credential: Credential?) -> ChallengeAnswer { ChallengeAnswer(.useCredential, credential) }
}
