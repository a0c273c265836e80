import Foundation
import Logging
import Migrations
import Storage

/// A permanent credential as a backend keeps it.
package struct StoredCredential: Sendable, Equatable {
    package var space: ProtectionSpace
    package var user: String
    package var password: String
    package var isDefault: Bool

    package init(space: ProtectionSpace, user: String, password: String, isDefault: Bool) {
        self.space = space
        self.user = user
        self.password = password
        self.isDefault = isDefault
    }
}

/// What a backend holds: the credentials it can read, and how many it
/// holds that it cannot read now (a locked keyring shows neither their
/// spaces nor their users).
package struct LoadedCredentials: Sendable {
    package var credentials: [StoredCredential] = []
    package var locked = 0

    package init(credentials: [StoredCredential] = [], locked: Int = 0) {
        self.credentials = credentials
        self.locked = locked
    }
}

/// Where a `CredentialStore` keeps its permanent credentials: the SQLite
/// file or the desktop keyring. Calls come from the store, one at a time
/// (the store serialises its writes), never under the store's table lock.
package protocol PermanentCredentials: Sendable {
    /// Which backend this is.
    var backend: CredentialStore.Backend { get }
    /// Every credential the backend holds for this store.
    func load() throws(StoreError) -> LoadedCredentials
    /// Stores (or replaces) a credential; when it is the default, `demoted`
    /// is the space's earlier default, to be kept as an ordinary credential.
    func save(_ credential: StoredCredential, demoting demoted: StoredCredential?) throws(StoreError)
    /// Removes the user's credential for the space.
    func remove(user: String, for space: ProtectionSpace) throws(StoreError)
    /// Removes every credential of this store.
    func removeAll() throws(StoreError)
    /// The credentials of one space, asked again (when items were locked,
    /// or another process may have stored some).
    func load(_ space: ProtectionSpace) throws(StoreError) -> LoadedCredentials
    /// Whether other processes change it while this one runs (a fleet's
    /// database): a space missing from memory is then asked for again.
    var isShared: Bool { get }
    /// Tells `handler` of everything the backend holds after another process
    /// changed it; a file or keyring never calls it.
    func observeOthers(_ handler: @escaping @Sendable (LoadedCredentials) -> Void)
}

extension PermanentCredentials {
    package var isShared: Bool { false }
    package func observeOthers(_ handler: @escaping @Sendable (LoadedCredentials) -> Void) {}
}

/// The 0600 SQLite file (`Credentials.sqlite`): passwords in plain text,
/// protected by the file's mode only, as git's `credential-store` keeps them.
struct FileCredentials: PermanentCredentials {
    let database: Database
    let path: String

    var backend: CredentialStore.Backend { .file }

    /// Opens (creating as needed) the file at `path`.
    init(path: String, logger: Logger) throws(StoreError) {
        do throws(StorageError) {
            database = try Database(path: path, migrations: Schema.credentials, options: .privateStore(logger: logger))
        } catch {
            throw StoreError(error, path: path)
        }
        self.path = path
    }

    func load() throws(StoreError) -> LoadedCredentials {
        do throws(StorageError) {
            return LoadedCredentials(credentials: try rows())
        } catch {
            throw StoreError(error, path: path)
        }
    }

    private func rows() throws(StorageError) -> [StoredCredential] {
        try database.read { (connection: Connection) throws(SQLiteError) in
            try connection.query("SELECT host, port, protocol, realm, method, is_proxy, user, password, is_default FROM credentials") { row in
                StoredCredential(
                    space: ProtectionSpace(
                        host: row.text(0) ?? "", port: row.int(1), protocol: row.text(2) ?? "",
                        realm: (row.text(3) ?? "").isEmpty ? nil : row.text(3),
                        authenticationMethod: .init(rawValue: row.text(4) ?? "default"), isProxy: row.int64(5) != 0),
                    user: row.text(6) ?? "", password: row.text(7) ?? "", isDefault: row.int64(8) != 0)
            }
        }
    }

    func save(_ credential: StoredCredential, demoting demoted: StoredCredential?) throws(StoreError) {
        try write { (connection: Connection) throws(SQLiteError) in
            if credential.isDefault {
                try connection.run("UPDATE credentials SET is_default = 0 WHERE \(Self.spaceMatch)", Self.spaceValues(credential.space))
            }
            try connection.run(
                """
                INSERT OR REPLACE INTO credentials(host, port, protocol, realm, method, is_proxy, user, password, is_default, created)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                Self.spaceValues(credential.space) + [
                    .text(credential.user), .text(credential.password), .integer(credential.isDefault ? 1 : 0), .real(Date().timeIntervalSince1970),
                ])
        }
    }

    func remove(user: String, for space: ProtectionSpace) throws(StoreError) {
        try write { (connection: Connection) throws(SQLiteError) in
            try connection.run("DELETE FROM credentials WHERE \(Self.spaceMatch) AND user = ?", Self.spaceValues(space) + [.text(user)])
        }
    }

    func removeAll() throws(StoreError) {
        try write { (connection: Connection) throws(SQLiteError) in try connection.run("DELETE FROM credentials") }
    }

    func load(_ space: ProtectionSpace) throws(StoreError) -> LoadedCredentials {
        LoadedCredentials(credentials: try load().credentials.filter { $0.space == space })
    }

    /// How many credentials the file holds, without loading them.
    func count() throws(StoreError) -> Int {
        do throws(StorageError) {
            return try database.read { (connection: Connection) throws(SQLiteError) in
                try connection.query("SELECT count(*) FROM credentials") { $0.int(0) }.first ?? 0
            }
        } catch {
            throw StoreError(error, path: path)
        }
    }

    private func write(_ body: (Connection) throws(SQLiteError) -> Void) throws(StoreError) {
        do throws(StorageError) {
            try database.write { (connection: Connection) throws(SQLiteError) in try body(connection) }
        } catch {
            throw StoreError(error, path: path)
        }
    }

    private static let spaceMatch = "host = ? AND port = ? AND protocol = ? AND realm = ? AND method = ? AND is_proxy = ?"

    private static func spaceValues(_ space: ProtectionSpace) -> [SQLiteValue] {
        [
            .text(space.host), .integer(Int64(space.port)), .text(space.protocol), .text(space.realm ?? ""),
            .text(space.authenticationMethod.rawValue), .integer(space.isProxy ? 1 : 0),
        ]
    }
}

/// The desktop keyring (the Secret Service), one item per space and user,
/// scoped to the store's directory.
struct KeyringCredentials: PermanentCredentials {
    let keyring: SecretServiceKeyring

    var backend: CredentialStore.Backend { .keyring }

    func load() throws(StoreError) -> LoadedCredentials {
        try load(nil)
    }

    func load(_ space: ProtectionSpace) throws(StoreError) -> LoadedCredentials {
        try load(Optional(space))
    }

    private func load(_ space: ProtectionSpace?) throws(StoreError) -> LoadedCredentials {
        do throws(SecretServiceKeyring.Failure) {
            let found = try keyring.items(in: space)
            return LoadedCredentials(
                credentials: found.items.map { StoredCredential(space: $0.space, user: $0.user, password: $0.password ?? "", isDefault: $0.isDefault) },
                locked: found.locked)
        } catch {
            throw Self.storeError(error)
        }
    }

    func save(_ credential: StoredCredential, demoting demoted: StoredCredential?) throws(StoreError) {
        do throws(SecretServiceKeyring.Failure) {
            try keyring.store(user: credential.user, password: credential.password, for: credential.space, isDefault: credential.isDefault)
            if let demoted, demoted.user != credential.user {
                try keyring.store(user: demoted.user, password: demoted.password, for: demoted.space, isDefault: false)
            }
        } catch {
            throw Self.storeError(error)
        }
    }

    func remove(user: String, for space: ProtectionSpace) throws(StoreError) {
        do throws(SecretServiceKeyring.Failure) {
            try keyring.remove(user: user, for: space)
        } catch {
            throw Self.storeError(error)
        }
    }

    func removeAll() throws(StoreError) {
        do throws(SecretServiceKeyring.Failure) {
            try keyring.removeAll()
        } catch {
            throw Self.storeError(error)
        }
    }

    static func storeError(_ failure: SecretServiceKeyring.Failure) -> StoreError {
        StoreError(kind: .keyring, message: "the keyring (Secret Service) failed: \(failure.description)", path: nil)
    }
}
