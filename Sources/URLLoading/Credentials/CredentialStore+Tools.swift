public import Foundation
import Logging

/// What `cachetool credentials` does with a store's backends directly: list
/// each backend's entries, remove, and move every entry from one backend to
/// the other. Passwords are read only to be written again, never returned.
@_spi(Tools) extension CredentialStore {
    /// One credential as a backend holds it, without its password.
    public struct ListedCredential: Sendable {
        /// The credential's space.
        public var space: ProtectionSpace
        /// Its user name.
        public var user: String
        /// Whether it is the space's default.
        public var isDefault: Bool
        /// The backend holding it.
        public var backend: Backend
    }

    /// What the backends of a store hold.
    public struct Listing: Sendable {
        /// Every credential they can read.
        public var credentials: [ListedCredential] = []
        /// How many items a locked keyring holds (whose spaces and users it does not show).
        public var lockedInKeyring = 0
    }

    /// The backends that hold (or could hold) the store in `directory`: the
    /// file when it exists, the keyring when a Secret Service answers.
    static func presentBackends(_ directory: URL) throws(StoreError) -> [any PermanentCredentials] {
        var backends: [any PermanentCredentials] = []
        let filePath = directory.appendingPathComponent(fileName).path
        if FileManager.default.fileExists(atPath: filePath) {
            backends.append(try FileCredentials(path: filePath, logger: Logger(label: "urlloading.credentials")))
        }
        if SecretServiceKeyring.available(timeout: keyringTimeout) { backends.append(keyring(directory)) }
        guard !backends.isEmpty else {
            throw StoreError(
                kind: .notFound, message: "no credential file here and no keyring on a session bus; check --data-dir or the application identifier",
                path: filePath)
        }
        return backends
    }

    /// Every credential of every backend of the store in `directory`.
    ///
    /// - Throws: `StoreError` (`.notFound` when there is neither a file nor a keyring).
    public static func listing(directory: URL) throws(StoreError) -> Listing {
        var listing = Listing()
        for backend in try presentBackends(directory) {
            let loaded = try backend.load()
            listing.credentials += loaded.credentials.map {
                ListedCredential(space: $0.space, user: $0.user, isDefault: $0.isDefault, backend: backend.backend)
            }
            listing.lockedInKeyring += loaded.locked
        }
        return listing
    }

    /// What an opened store holds (a fleet's, whose backend is its
    /// database), as `listing(directory:)` shows a folder's backends.
    public static func listing(of store: CredentialStore) -> Listing {
        let (spaces, defaults) = store.table.withLock { ($0.spaces, $0.defaults) }
        var listing = Listing()
        for (space, users) in spaces {
            for (user, credential) in users where credential.persistence == .permanent {
                listing.credentials.append(ListedCredential(space: space, user: user, isDefault: defaults[space] == user, backend: store.backend))
            }
        }
        return listing
    }

    /// Removes the credentials of `host` (of one user, of one realm) from
    /// every backend of the store in `directory`.
    ///
    /// - Returns: How many were removed.
    public static func remove(directory: URL, host: String, user: String?, realm: String?) throws(StoreError) -> Int {
        var removed = 0
        for backend in try presentBackends(directory) {
            for entry in try backend.load().credentials
            where entry.space.host == host.lowercased() && (realm == nil || entry.space.realm == realm) && (user == nil || entry.user == user) {
                try backend.remove(user: entry.user, for: entry.space)
                removed += 1
            }
        }
        return removed
    }

    /// Moves every credential of the store in `directory` into `target`
    /// (`.file` or `.keyring`): written there, read back and compared, and
    /// only then removed from the other backend. Nothing moves when any
    /// entry is locked or a write fails; a credential the target already
    /// holds for the same space and user is replaced.
    ///
    /// - Returns: How many credentials moved.
    /// - Throws: `StoreError` (`.keyring` when the keyring is not there or locked).
    public static func migrate(directory: URL, to target: Backend) throws(StoreError) -> Int {
        let logger = Logger(label: "urlloading.credentials")
        let filePath = directory.appendingPathComponent(fileName).path
        let source: any PermanentCredentials
        let destination: any PermanentCredentials
        let keyringThere = SecretServiceKeyring.available(timeout: keyringTimeout)
        switch target {
        case .keyring:
            guard keyringThere else { throw StoreError(kind: .keyring, message: "no Secret Service answers on the session bus", path: nil) }
            guard FileManager.default.fileExists(atPath: filePath) else { return 0 }
            (source, destination) = (try FileCredentials(path: filePath, logger: logger), keyring(directory))
        case .file:
            guard keyringThere else { throw StoreError(kind: .keyring, message: "no Secret Service answers on the session bus", path: nil) }
            (source, destination) = (keyring(directory), try FileCredentials(path: filePath, logger: logger))
        case .memory, .database:
            throw StoreError(kind: .configuration, message: "credentials move to the file or the keyring", path: nil)
        }
        let loaded = try source.load()
        // A locked keyring as source or target: nothing can be checked, nothing moves.
        let locked = loaded.locked + (target == .keyring ? try destination.load().locked : 0)
        guard locked == 0 else {
            throw StoreError(kind: .keyring, message: "the keyring holds \(locked) locked items; unlock it and run again (nothing moved)", path: nil)
        }
        let entries = loaded.credentials
        var present = try destination.load().credentials
        for entry in entries {
            let demoted = entry.isDefault ? present.first { $0.space == entry.space && $0.isDefault && $0.user != entry.user } : nil
            try destination.save(entry, demoting: demoted)
            if let demoted, let index = present.firstIndex(of: demoted) { present[index].isDefault = false }
        }
        let written = try destination.load().credentials
        let missing = entries.filter { entry in !written.contains { $0.space == entry.space && $0.user == entry.user && $0.password == entry.password } }
        guard missing.isEmpty else {
            throw StoreError(
                kind: .ioError, message: "\(missing.count) credentials did not read back from the \(target); nothing was removed from the other backend",
                path: nil)
        }
        for entry in entries { try source.remove(user: entry.user, for: entry.space) }
        return entries.count
    }
}
