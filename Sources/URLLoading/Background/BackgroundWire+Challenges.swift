import Foundation

/// A challenge of a background transfer as transferd passes it to the app:
/// where credentials would apply, never a secret.
package struct BackgroundChallenge: Codable, Sendable, Equatable {
    package var host: String
    package var port: Int
    package var protocolName: String
    package var realm: String?
    /// `ProtectionSpace.AuthenticationMethod`'s raw value.
    package var method: String
    package var isProxy: Bool
    package var previousFailureCount: Int

    package init(_ challenge: AuthenticationChallenge) {
        let space = challenge.protectionSpace
        host = space.host
        port = space.port
        protocolName = space.protocol
        realm = space.realm
        method = space.authenticationMethod.rawValue
        isProxy = space.isProxy
        previousFailureCount = challenge.previousFailureCount
    }

    /// The space the challenge is for.
    package var protectionSpace: ProtectionSpace {
        ProtectionSpace(
            host: host, port: port, protocol: protocolName, realm: realm, authenticationMethod: .init(rawValue: method), isProxy: isProxy)
    }

    /// The challenge as a delegate sees it (no response: it stayed in transferd).
    package var challenge: AuthenticationChallenge {
        AuthenticationChallenge(
            protectionSpace: protectionSpace, proposedCredential: nil, previousFailureCount: previousFailureCount, failureResponse: nil,
            serverChallenge: nil)
    }

    func check() throws(BackgroundWireError) {
        guard (1...255).contains(host.utf8.count), !host.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else {
            throw BackgroundWireError("a challenge's host that is not a host name")
        }
        guard (0...65535).contains(port) else { throw BackgroundWireError("a challenge's port of \(port)") }
        guard protocolName == "http" || protocolName == "https" else { throw BackgroundWireError("a challenge's protocol that is not http or https") }
        if let realm { try BackgroundMessage.text(realm, "a realm") }
        guard (1...32).contains(method.utf8.count), method.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw BackgroundWireError("a challenge's method that is not a token")
        }
        guard (0...1000).contains(previousFailureCount) else { throw BackgroundWireError("a challenge's failure count of \(previousFailureCount)") }
    }
}

/// The delegate's answer to a challenge. Its password goes from the app to
/// transferd over the user's own socket and is never journaled or shown.
package struct BackgroundChallengeAnswer: Codable, Sendable, Equatable, CustomStringConvertible {
    /// `Session.AuthChallengeDisposition` on the wire.
    package enum Disposition: String, Codable, Sendable {
        case useCredential
        case performDefaultHandling
        case cancelAuthenticationChallenge
        case rejectProtectionSpace
    }

    package var disposition: Disposition
    package var user: String?
    package var password: String?
    /// `Credential.Persistence`: none, forSession or permanent.
    package var persistence: String?

    package init(disposition: Disposition, user: String? = nil, password: String? = nil, persistence: String? = nil) {
        self.disposition = disposition
        self.user = user
        self.password = password
        self.persistence = persistence
    }

    /// A delegate's answer; only a password credential crosses (a client
    /// identity's files or a trust decision mean nothing to an HTTP challenge).
    package init(_ disposition: Session.AuthChallengeDisposition, _ credential: Credential?) {
        switch disposition {
        case .useCredential: self.disposition = .useCredential
        case .performDefaultHandling: self.disposition = .performDefaultHandling
        case .cancelAuthenticationChallenge: self.disposition = .cancelAuthenticationChallenge
        case .rejectProtectionSpace: self.disposition = .rejectProtectionSpace
        }
        if case .password(let user, let password)? = credential?.kind {
            self.user = user
            self.password = password
            switch credential?.persistence {
            case .permanent: persistence = "permanent"
            case .forSession: persistence = "forSession"
            default: persistence = "none"
            }
        }
    }

    /// The answer for the session transferd runs the transfer on.
    package var answer: (Session.AuthChallengeDisposition, Credential?) {
        // For this request only: transferd's one session serves every app of
        // the user, whose stores must not mix; keeping it is the app's part.
        let credential = user.map { Credential(user: $0, password: password ?? "", persistence: .none) }
        switch disposition {
        case .useCredential: return (.useCredential, credential)
        case .performDefaultHandling: return (.performDefaultHandling, nil)
        case .cancelAuthenticationChallenge: return (.cancelAuthenticationChallenge, nil)
        case .rejectProtectionSpace: return (.rejectProtectionSpace, nil)
        }
    }

    /// The disposition and the user; never the password.
    package var description: String {
        "BackgroundChallengeAnswer(\(disposition.rawValue)\(user.map { ", user: \($0)" } ?? ""))"
    }

    func check() throws(BackgroundWireError) {
        for text in [user, password, persistence].compactMap({ $0 }) {
            guard text.utf8.count <= 4096, !text.utf8.contains(0) else { throw BackgroundWireError("a challenge answer's field of \(text.utf8.count) bytes or with NUL") }
        }
        if let persistence, !["none", "forSession", "permanent"].contains(persistence) {
            throw BackgroundWireError("a credential persistence that is not none, forSession or permanent")
        }
    }
}
