public import Foundation

/// A credential as `NSKeyedArchiver` and `NSKeyedUnarchiver` see it
/// (Apple's `URLCredential` adopts `NSSecureCoding`): archiving a
/// `Credential` archives one of these, and unarchiving gives it back.
///
/// ```swift
/// let data = try NSKeyedArchiver.archivedData(withRootObject: credential, requiringSecureCoding: true)
/// let back = try NSKeyedUnarchiver.unarchivedObject(ofClass: ArchivedCredential.self, from: data)?.credential
/// ```
///
/// A secret (a password, a key's passphrase) is archived only with a
/// `.permanent` credential, which asks to be written down anyway, or
/// when the caller asks (`init(_:includingSecret:)`): archived bytes are
/// plain, and a `.forSession` or `.none` credential promised not to
/// outlive the process. Without it the unarchived credential has an
/// empty password (no passphrase). It is a class of its own, not nested in
/// `Credential`: Foundation on Linux archives top-level classes only.
public final class ArchivedCredential: NSObject, NSSecureCoding, Sendable {
    /// The credential archived or unarchived.
    public let credential: Credential
    private let includesSecret: Bool

    /// Wraps `credential` for an archiver.
    /// - Parameters:
    ///   - credential: The credential to archive.
    ///   - includingSecret: Archive the password or passphrase whatever the
    ///     persistence (a `.permanent` credential's always is).
    public init(_ credential: Credential, includingSecret: Bool = false) {
        self.credential = credential
        self.includesSecret = includingSecret || credential.persistence == .permanent
    }

    /// Whether archives of this class can be read with secure coding: yes.
    public static var supportsSecureCoding: Bool { true }

    /// Writes the credential's fields (the secret as the class says).
    public func encode(with coder: NSCoder) {
        coder.encode(credential.persistence.rawValue, forKey: "persistence")
        switch credential.kind {
        case .password(let user, let password):
            coder.encode("password", forKey: "kind")
            coder.encode(user, forKey: "user")
            if includesSecret { coder.encode(password, forKey: "password") }
        case .clientIdentity(let certificatePath, let privateKeyPath, let passphrase):
            coder.encode("clientIdentity", forKey: "kind")
            coder.encode(certificatePath, forKey: "certificatePath")
            coder.encode(privateKeyPath, forKey: "privateKeyPath")
            if includesSecret, let passphrase { coder.encode(passphrase, forKey: "passphrase") }
        case .serverTrust:
            coder.encode("serverTrust", forKey: "kind")
        }
    }

    /// Reads a credential; nil (the unarchiver's error, never a trap)
    /// when a field is missing, of another type or unknown.
    public init?(coder: NSCoder) {
        func text(_ key: String) -> String? {
            guard coder.containsValue(forKey: key) else { return nil }
            return coder.decodeObject(of: NSString.self, forKey: key).map { String($0) }
        }
        func refuse(_ reason: String) {
            guard coder.error == nil else { return }
            coder.failWithError(CocoaError(.coderReadCorrupt, userInfo: [NSDebugDescriptionErrorKey: "not a credential: \(reason)"]))
        }
        guard let persistence = text("persistence").flatMap(Credential.Persistence.init(rawValue:)) else {
            refuse("no persistence")
            return nil
        }
        switch text("kind") {
        case "password":
            guard let user = text("user") else {
                refuse("a password credential without a user")
                return nil
            }
            credential = Credential(user: user, password: text("password") ?? "", persistence: persistence)
        case "clientIdentity":
            guard let certificatePath = text("certificatePath"), let privateKeyPath = text("privateKeyPath") else {
                refuse("a client identity without its files")
                return nil
            }
            credential = Credential(
                certificatePath: certificatePath, privateKeyPath: privateKeyPath, passphrase: text("passphrase"), persistence: persistence)
        case "serverTrust":
            credential = .serverTrust
        default:
            refuse("an unknown kind")
            return nil
        }
        includesSecret = false
        super.init()
    }

    /// Whether `object` archives an equal credential.
    public override func isEqual(_ object: Any?) -> Bool { (object as? ArchivedCredential)?.credential == credential }
    /// Equal archives have equal hashes.
    public override var hash: Int { credential.hashValue }
    /// The credential's description: never its secret.
    public override var description: String { credential.description }
}

/// What lets `NSKeyedArchivedCredentialr` take a `Credential` where it takes objects,
/// as Foundation's own value types go to their classes: without it, the
/// archiver stops the process (a value that does not conform to `NSCoding`).
extension Credential: _ObjectiveCBridgeable {
    /// The class a credential becomes for Foundation's object APIs.
    public typealias _ObjectiveCType = ArchivedCredential

    /// The credential as an archivable object.
    public func _bridgeToObjectiveC() -> ArchivedCredential { ArchivedCredential(self) }

    /// The archived credential.
    public static func _forceBridgeFromObjectiveC(_ source: ArchivedCredential, result: inout Credential?) {
        result = source.credential
    }

    /// The archived credential; always succeeds.
    public static func _conditionallyBridgeFromObjectiveC(_ source: ArchivedCredential, result: inout Credential?) -> Bool {
        result = source.credential
        return true
    }

    /// The archived credential, or an empty `.none` one for no object.
    public static func _unconditionallyBridgeFromObjectiveC(_ source: ArchivedCredential?) -> Credential {
        source?.credential ?? Credential(user: "", password: "", persistence: .none)
    }
}
