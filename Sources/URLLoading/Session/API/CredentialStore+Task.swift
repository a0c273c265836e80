import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Apple's task-taking members of `URLCredentialStorage`: here, in
/// Session/, so that the credential store itself knows nothing of tasks.
extension CredentialStore {
    /// Stores a credential for a task (Apple's `set(_:for:task:)`).
    public func set(_ credential: Credential, for space: ProtectionSpace, task: SessionTask) {
        set(credential, for: space)
    }

    /// Stores a credential as the space's default for a task.
    public func setDefaultCredential(_ credential: Credential, for space: ProtectionSpace, task: SessionTask) {
        setDefaultCredential(credential, for: space)
    }

    /// Removes the user's credential for the space for a task.
    public func remove(_ credential: Credential, for space: ProtectionSpace, task: SessionTask) {
        remove(credential, for: space)
    }

    /// Removes the user's credential for the space for a task (Apple's
    /// `remove(_:for:options:task:)`; the options mean nothing on Linux).
    public func remove(_ credential: Credential, for space: ProtectionSpace, options: [String: Any]?, task: SessionTask) {
        remove(credential, for: space)
    }

    /// The credentials of a space, delivered to `completionHandler`.
    public func getCredentials(for space: ProtectionSpace, task: SessionTask, completionHandler: @escaping @Sendable ([String: Credential]?) -> Void) {
        completionHandler(credentials(for: space))
    }

    /// The space's default credential, delivered to `completionHandler`.
    public func getDefaultCredential(for space: ProtectionSpace, task: SessionTask, completionHandler: @escaping @Sendable (Credential?) -> Void) {
        completionHandler(defaultCredential(for: space))
    }
}
