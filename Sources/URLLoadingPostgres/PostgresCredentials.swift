import Foundation
import Logging
import Postgres
@_spi(Tools) public import URLLoading

/// Permanent credentials in a PostgreSQL database a fleet shares,
/// under the same rules as the SQLite file: one row per space and user, a
/// default per space; for-session credentials stay in each worker's memory.
/// The table is readable by the role that made it only. A change in one
/// worker reaches the others through `NOTIFY` (a notice without content:
/// any role of the database may listen), after which they read the table
/// again; a space one worker lacks is also asked for on a challenge.
final class PostgresCredentials: PermanentCredentials {
    private let database: PostgresDatabase
    let listener: PostgresListener
    private let logger = Logger(label: "urlloading.credentials")
    static let channel = "urlloading_credentials"
    private static let columns = "host, port, protocol, realm, method, is_proxy, username, password, is_default"
    private static let spaceMatch = "host = $1 AND port = $2 AND protocol = $3 AND realm = $4 AND method = $5 AND is_proxy = $6"

    init(database: PostgresDatabase) throws(StoreError) {
        self.database = database
        listener = try database.openStore("credentials", migrations: PostgresSchema.credentials, channel: Self.channel)
    }

    deinit { listener.stop() }

    var backend: CredentialStore.Backend { .database }
    var isShared: Bool { true }

    private static func spaceValues(_ space: ProtectionSpace) -> [PostgresValue] {
        [
            .text(space.host), .int(Int64(space.port)), .text(space.protocol), .text(space.realm ?? ""),
            .text(space.authenticationMethod.rawValue), .bool(space.isProxy),
        ]
    }

    private static func credential(_ row: PostgresRow) -> StoredCredential? {
        guard let host = row.text(0), let port = row.int(1), (0...65535).contains(port), let scheme = row.text(2) else { return nil }
        let realm = row.text(3).flatMap { $0.isEmpty ? nil : $0 }
        let space = ProtectionSpace(
            host: host, port: port, protocol: scheme, realm: realm,
            authenticationMethod: .init(rawValue: row.text(4) ?? "default"), isProxy: row.bool(5) ?? false)
        return StoredCredential(space: space, user: row.text(6) ?? "", password: row.text(7) ?? "", isDefault: row.bool(8) ?? false)
    }

    func load() throws(StoreError) -> LoadedCredentials {
        try database.withConnection { (connection) throws(PostgresError) in
            LoadedCredentials(credentials: try connection.query("SELECT \(Self.columns) FROM urlloading_credentials", [], Self.credential).compactMap { $0 })
        }
    }

    func load(_ space: ProtectionSpace) throws(StoreError) -> LoadedCredentials {
        try database.withConnection { (connection) throws(PostgresError) in
            LoadedCredentials(
                credentials: try connection.query(
                    "SELECT \(Self.columns) FROM urlloading_credentials WHERE \(Self.spaceMatch)", Self.spaceValues(space), Self.credential
                ).compactMap { $0 })
        }
    }

    func save(_ credential: StoredCredential, demoting demoted: StoredCredential?) throws(StoreError) {
        try change { (connection) throws(PostgresError) in
            if credential.isDefault {
                try connection.run("UPDATE urlloading_credentials SET is_default = false WHERE \(Self.spaceMatch)", Self.spaceValues(credential.space))
            }
            try connection.run(
                """
                INSERT INTO urlloading_credentials(\(Self.columns), created) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                ON CONFLICT (host, port, protocol, realm, method, is_proxy, username)
                DO UPDATE SET password = EXCLUDED.password, is_default = EXCLUDED.is_default
                """,
                Self.spaceValues(credential.space) + [
                    .text(credential.user), .text(credential.password), .bool(credential.isDefault), .double(Date().timeIntervalSince1970),
                ])
        }
    }

    func remove(user: String, for space: ProtectionSpace) throws(StoreError) {
        try change { (connection) throws(PostgresError) in
            try connection.run("DELETE FROM urlloading_credentials WHERE \(Self.spaceMatch) AND username = $7", Self.spaceValues(space) + [.text(user)])
        }
    }

    func removeAll() throws(StoreError) {
        try change { (connection) throws(PostgresError) in try connection.run("DELETE FROM urlloading_credentials") }
    }

    /// A change in one transaction, announced to the other workers.
    private func change(_ body: (PostgresConnection) throws(PostgresError) -> Void) throws(StoreError) {
        try database.withConnection { (connection) throws(PostgresError) in
            try connection.transaction { (connection) throws(PostgresError) in
                try body(connection)
                try listener.announce("changed", on: connection)
            }
        }
    }

    func observeOthers(_ handler: @escaping @Sendable (LoadedCredentials) -> Void) {
        listener.observe { [weak self] _ in
            guard let self else { return }
            do {
                handler(try self.load())
            } catch {
                self.logger.warning("another worker's credential change could not be read", metadata: ["error": "\(error)"])
            }
        }
    }
}

extension CredentialStore {
    /// A credential store in the fleet's PostgreSQL database: permanent
    /// credentials in a table only the database role of the store may read
    /// (in plain text there: `backend` says `.database`), shared by every
    /// worker with a store on the same database.
    ///
    /// - Throws: `StoreError` when its table cannot be made or is of a newer schema.
    public convenience init(database: PostgresDatabase) throws(StoreError) {
        try self.init(backend: PostgresCredentials(database: database), location: database.description, reason: "a fleet's database")
    }
}
