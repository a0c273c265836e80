public import Foundation

/// Where a credential applies (Apple's `URLProtectionSpace`): a
/// server or proxy, a protocol, a realm and an authentication method.
public struct ProtectionSpace: Sendable, Hashable, CustomStringConvertible {
    /// How the space authenticates.
    public struct AuthenticationMethod: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// Any method (Apple's `NSURLAuthenticationMethodDefault`): what `.netrc` entries and
        /// credentials stored without a method use.
        public static let `default` = AuthenticationMethod(rawValue: "default")
        /// RFC 7617 Basic.
        public static let httpBasic = AuthenticationMethod(rawValue: "basic")
        /// RFC 7616 Digest.
        public static let httpDigest = AuthenticationMethod(rawValue: "digest")
        /// NTLM (carried out by libcurl).
        public static let ntlm = AuthenticationMethod(rawValue: "ntlm")
        /// Negotiate / Kerberos (carried out by libcurl).
        public static let negotiate = AuthenticationMethod(rawValue: "negotiate")
        /// A TLS server asks for a client certificate.
        public static let clientCertificate = AuthenticationMethod(rawValue: "client-certificate")
        /// The client decides whether to trust a TLS server.
        public static let serverTrust = AuthenticationMethod(rawValue: "server-trust")

        /// The method's name.
        public var description: String { rawValue }

        /// Challenges of these methods go to the session-level delegate method first.
        public var isSessionLevel: Bool {
            self == .ntlm || self == .negotiate || self == .clientCertificate || self == .serverTrust
        }
    }

    /// The host name, lower case.
    public var host: String
    /// The port.
    public var port: Int
    /// `http` or `https` (for a proxy: the proxy's own protocol).
    public var `protocol`: String
    /// The realm the server named; nil when none.
    public var realm: String?
    /// The authentication method.
    public var authenticationMethod: AuthenticationMethod
    /// Whether the space is a proxy's.
    public var isProxy: Bool

    /// A protection space.
    public init(
        host: String, port: Int, protocol: String, realm: String? = nil,
        authenticationMethod: AuthenticationMethod = .default, isProxy: Bool = false
    ) {
        self.host = host.lowercased()
        self.port = port
        self.protocol = `protocol`.lowercased()
        self.realm = realm
        self.authenticationMethod = authenticationMethod
        self.isProxy = isProxy
    }

    /// The space of a server for a URL, without realm or method.
    public init?(url: URL, realm: String? = nil, authenticationMethod: AuthenticationMethod = .default) {
        guard let host = url.host, let scheme = url.scheme?.lowercased() else { return nil }
        self.init(
            host: host, port: url.port ?? (scheme == "https" ? 443 : 80), protocol: scheme, realm: realm,
            authenticationMethod: authenticationMethod)
    }

    /// Whether credentials are sent to the space only over an encrypted connection.
    public var receivesCredentialSecurely: Bool { `protocol` == "https" || authenticationMethod == .httpDigest }

    /// The same server without realm and method: where `.netrc` credentials live.
    var serverOnly: ProtectionSpace {
        ProtectionSpace(host: host, port: port, protocol: `protocol`, isProxy: isProxy)
    }

    /// Host, protocol, method (by Foundation's name), realm and port, in
    /// the shape of Apple's `NSURLProtectionSpace` description; a proxy's
    /// protocol is its `Proxy-Type`.
    public var description: String {
        let server = isProxy ? "(null)" : `protocol`
        let proxyType = isProxy ? `protocol` : "(null)"
        return "<NSURLProtectionSpace>: Host:\(host), Server:\(server), Auth-Scheme:\(authenticationMethod.appleName), "
            + "Realm:\(realm ?? "(null)"), Port:\(port), Proxy:\(isProxy ? "YES" : "NO"), Proxy-Type:\(proxyType)"
    }
}

/// A credential (Apple's `URLCredential`): a user and password, a client
/// identity, or the decision to trust a server; with how long to keep it.
///
/// `description` and `debugDescription` name the user, never the password
/// or the key's passphrase.
public struct Credential: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// How long a store keeps a credential.
    public enum Persistence: String, Sendable, Hashable, CaseIterable {
        /// Used for this request only; never stored.
        case none
        /// Kept in memory until the process ends.
        case forSession
        /// Kept on disk (the persistent store), readable by the owner only.
        case permanent
    }

    /// What the credential holds.
    public enum Kind: Sendable, Hashable {
        /// A user name and password.
        case password(user: String, password: String)
        /// A client certificate and its private key, as PEM files.
        case clientIdentity(certificatePath: String, privateKeyPath: String, passphrase: String?)
        /// Trust in a TLS server whose certificate did not verify (or that the delegate pinned).
        case serverTrust
    }

    /// The contents.
    public var kind: Kind
    /// How long a store keeps it.
    public var persistence: Persistence

    /// A user name and password.
    public init(user: String, password: String, persistence: Persistence) {
        self.kind = .password(user: user, password: password)
        self.persistence = persistence
    }

    /// A client identity from PEM files (for servers that ask for a certificate).
    public init(certificatePath: String, privateKeyPath: String, passphrase: String? = nil, persistence: Persistence = .forSession) {
        self.kind = .clientIdentity(certificatePath: certificatePath, privateKeyPath: privateKeyPath, passphrase: passphrase)
        self.persistence = persistence
    }

    /// Trust in the server of a server-trust challenge.
    public static var serverTrust: Credential { Credential(kind: .serverTrust, persistence: .none) }

    private init(kind: Kind, persistence: Persistence) {
        self.kind = kind
        self.persistence = persistence
    }

    /// The user name of a password credential.
    public var user: String? {
        if case .password(let user, _) = kind { return user }
        return nil
    }

    /// The password of a password credential.
    public var password: String? {
        if case .password(_, let password) = kind { return password }
        return nil
    }

    /// Whether the credential has a password.
    public var hasPassword: Bool { password.map { !$0.isEmpty } ?? false }

    /// The user and persistence; never the password.
    public var description: String {
        switch kind {
        case .password(let user, _): return "Credential(user: \(user), password: <redacted>, \(persistence))"
        case .clientIdentity(let certificatePath, _, _): return "Credential(client identity: \(certificatePath), \(persistence))"
        case .serverTrust: return "Credential(server trust)"
        }
    }

    /// The same as `description`.
    public var debugDescription: String { description }

    /// The credential itself, as Apple's `NSCopying` credential answers
    /// `copy()`: a value, so every copy is equal.
    public func copy() -> Any { self }

    /// Whether `object` is an equal credential (Apple's `NSObject.isEqual`).
    public func isEqual(_ object: Any?) -> Bool { (object as? Credential) == self }

    /// Apple's `NSObject.hash`: equal credentials have equal hashes.
    public var hash: Int { hashValue }

    /// What `dump` and debuggers show: no secrets.
    public var customMirror: Mirror {
        Mirror(self, children: ["description": description], displayStyle: .struct)
    }
}
