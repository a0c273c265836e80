public import Foundation
import Logging
import Migrations
import Storage
import Locking

/// A credential store (Apple's `URLCredentialStorage`, SPEC A1): credentials
/// by protection space and user, with a default per space.
///
/// A store in memory (`CredentialStore()`, what ephemeral sessions get)
/// keeps everything in memory; a store opened in a directory
/// (`CredentialStore(directory:)`, what default sessions share through
/// `CredentialStore.shared`) writes permanent credentials to an SQLite file
/// (`Credentials.sqlite`, mode 0600 in a 0700 directory) and keeps
/// for-session ones in memory for the life of the process. Opening a file
/// that group or others can read fails with `StoreError.Kind.insecurePermissions`.
/// Credentials with persistence `.none` are never stored.
public final class CredentialStore: Sendable, CustomStringConvertible {
    private let table: Lock<CredentialTable>
    private let database: Database?
    private let logger = Logger(label: "urlloading.credentials")
    /// The database file; nil for a store in memory.
    public let path: String?
    /// Why the file asked for could not be opened, for `shared`, which then
    /// keeps credentials in memory only; nil otherwise.
    public let startupError: StoreError?

    /// The file name used inside a data directory.
    public static let fileName = "Credentials.sqlite"

    /// Where a store keeps its permanent credentials.
    public enum Backend: String, Sendable, CustomStringConvertible {
        /// In memory only: nothing outlives the process.
        case memory
        /// The 0600 SQLite file: passwords in plain text, as git's
        /// `credential-store` keeps them, protected by the file's mode only.
        case file

        /// "memory", or "file (plain text)".
        public var description: String { self == .file ? "file (plain text)" : "memory" }
        /// Whether permanent secrets are kept unencrypted on disk.
        public var keepsPlainText: Bool { self == .file }
    }

    /// Where this store keeps its permanent credentials.
    public var backend: Backend { database == nil ? .memory : .file }

    /// An empty store in memory.
    public init() {
        table = Lock(CredentialTable())
        database = nil
        path = nil
        startupError = nil
    }

    /// A store in memory standing in for a file that could not be opened.
    init(fallbackFor failure: StoreError) {
        table = Lock(CredentialTable())
        database = nil
        path = nil
        startupError = failure
    }

    /// Opens (creating as needed) the store kept in `directory`.
    ///
    /// - Throws: `StoreError` (`.insecurePermissions` when others can read
    ///   the file, `.newerSchema`, `.locked`, ...).
    public init(directory: URL) throws(StoreError) {
        let path = directory.appendingPathComponent(Self.fileName).path
        var options = Database.Options()
        options.fileMode = 0o600
        options.directoryMode = 0o700
        options.requirePrivateFile = true
        options.onCorruption = .moveAside
        options.logger = logger
        do throws(StorageError) {
            let database = try Database(path: path, migrations: Schema.credentials, options: options)
            var loaded = CredentialTable()
            let rows = try database.read { (connection: Connection) throws(SQLiteError) in
                try connection.query("SELECT host, port, protocol, realm, method, is_proxy, user, password, is_default FROM credentials") { row in
                    (
                        ProtectionSpace(
                            host: row.text(0) ?? "", port: row.int(1), protocol: row.text(2) ?? "",
                            realm: (row.text(3) ?? "").isEmpty ? nil : row.text(3),
                            authenticationMethod: .init(rawValue: row.text(4) ?? "default"), isProxy: row.int64(5) != 0),
                        Credential(user: row.text(6) ?? "", password: row.text(7) ?? "", persistence: .permanent), row.int64(8) != 0
                    )
                }
            }
            for (space, credential, isDefault) in rows { _ = loaded.set(credential, for: space, isDefault: isDefault) }
            self.database = database
            table = Lock(loaded)
        } catch {
            throw StoreError(error, path: path)
        }
        self.path = path
        startupError = nil
    }

    /// The application's shared store (Apple's `URLCredentialStorage.shared`):
    /// the one default sessions use, `Credentials.sqlite` under
    /// `$XDG_DATA_HOME/<app>/`; in memory only when that file cannot be
    /// opened (see `startupError`).
    public static var shared: CredentialStore {
        SharedStores.credentialStore(for: StoreLocations.defaultApplicationIdentifier)
    }

    /// The credentials of a space, by user name (Apple's optional shape: nil
    /// when the space has none).
    public func credentials(for space: ProtectionSpace) -> [String: Credential]? {
        table.withLock { $0.spaces[space] }
    }

    /// Every space and its credentials.
    public var allCredentials: [ProtectionSpace: [String: Credential]] { table.withLock { $0.spaces } }

    /// The credential a session uses for the space when the delegate does not choose.
    public func defaultCredential(for space: ProtectionSpace) -> Credential? {
        table.withLock { $0.defaultCredential(for: space) }
    }

    /// Stores a credential; it becomes the default if the space had none.
    public func set(_ credential: Credential, for space: ProtectionSpace) {
        set(credential, for: space, isDefault: false)
    }

    /// Stores a credential as the space's default.
    public func setDefaultCredential(_ credential: Credential, for space: ProtectionSpace) {
        set(credential, for: space, isDefault: true)
    }

    /// Stores a credential (replacing the user's earlier one), as the space's
    /// default when `isDefault` or when the space had none.
    public func set(_ credential: Credential, for space: ProtectionSpace, isDefault: Bool) {
        guard credential.persistence != .none else { return }
        table.withLock { table in
            let becameDefault = table.set(credential, for: space, isDefault: isDefault)
            guard credential.persistence == .permanent, let user = credential.user, let password = credential.password else { return }
            write { (connection: Connection) throws(SQLiteError) in
                if becameDefault {
                    try connection.run("UPDATE credentials SET is_default = 0 WHERE \(Self.spaceMatch)", Self.spaceValues(space))
                }
                try connection.run(
                    """
                    INSERT OR REPLACE INTO credentials(host, port, protocol, realm, method, is_proxy, user, password, is_default, created)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, Self.spaceValues(space) + [.text(user), .text(password), .integer(becameDefault ? 1 : 0), .real(Date().timeIntervalSince1970)])
            }
        }
    }

    /// Removes the user's credential for the space.
    public func remove(_ credential: Credential, for space: ProtectionSpace) {
        let user = credential.user ?? ""
        table.withLock { table in
            table.remove(user: user, for: space)
            write { (connection: Connection) throws(SQLiteError) in
                try connection.run("DELETE FROM credentials WHERE \(Self.spaceMatch) AND user = ?", Self.spaceValues(space) + [.text(user)])
            }
        }
    }

    /// Removes every credential.
    public func removeAll() {
        table.withLock { table in
            table = CredentialTable()
            write { (connection: Connection) throws(SQLiteError) in try connection.run("DELETE FROM credentials") }
        }
    }

    /// Adds the `machine` entries of a `.netrc` file (by default `~/.netrc`)
    /// as permanent credentials for those hosts over https and http, without
    /// realm, which sessions use when a challenge's own space has no default.
    ///
    /// - Returns: How many entries were imported.
    /// - Throws: The file system's error when the file cannot be read.
    @discardableResult
    public func importNetrc(from url: URL = URL(fileURLWithPath: NSHomeDirectory()).appendingPathComponent(".netrc")) throws -> Int {
        let entries = Netrc.parse(try String(contentsOf: url, encoding: .utf8))
        for entry in entries {
            for (scheme, port) in [("https", 443), ("http", 80)] {
                let space = ProtectionSpace(host: entry.machine, port: port, protocol: scheme)
                set(Credential(user: entry.login, password: entry.password, persistence: .permanent), for: space, isDefault: true)
            }
        }
        return entries.count
    }

    private static let spaceMatch = "host = ? AND port = ? AND protocol = ? AND realm = ? AND method = ? AND is_proxy = ?"

    private static func spaceValues(_ space: ProtectionSpace) -> [SQLiteValue] {
        [
            .text(space.host), .integer(Int64(space.port)), .text(space.protocol), .text(space.realm ?? ""),
            .text(space.authenticationMethod.rawValue), .integer(space.isProxy ? 1 : 0),
        ]
    }

    /// Writes a change to the file, if any; a failure is logged (never with
    /// the credential) and the change stays in memory for this process.
    private func write(_ body: (Connection) throws(SQLiteError) -> Void) {
        guard let database else { return }
        do {
            try database.write { (connection: Connection) throws(SQLiteError) in try body(connection) }
        } catch {
            logger.error(
                "credential store write failed; the change is kept in memory only",
                metadata: ["error": "\(StoreError(error, path: path ?? ""))"])
        }
    }

    /// Where the store lives and the number of spaces, never a credential.
    public var description: String { "CredentialStore(\(path ?? "memory"), \(table.withLock { $0.spaces.count }) spaces)" }
}

/// The in-memory core of both stores.
struct CredentialTable: Sendable {
    var spaces: [ProtectionSpace: [String: Credential]] = [:]
    var defaults: [ProtectionSpace: String] = [:]

    func defaultCredential(for space: ProtectionSpace) -> Credential? {
        guard let credentials = spaces[space] else { return nil }
        if let user = defaults[space], let credential = credentials[user] { return credential }
        return credentials.count == 1 ? credentials.values.first : nil
    }

    /// Returns whether the credential became the default.
    mutating func set(_ credential: Credential, for space: ProtectionSpace, isDefault: Bool) -> Bool {
        let user = credential.user ?? ""
        spaces[space, default: [:]][user] = credential
        if isDefault || defaults[space] == nil {
            defaults[space] = user
            return true
        }
        return false
    }

    mutating func remove(user: String, for space: ProtectionSpace) {
        spaces[space]?[user] = nil
        if spaces[space]?.isEmpty == true { spaces[space] = nil }
        if defaults[space] == user { defaults[space] = nil }
    }
}

extension CredentialStore: Equatable {
    /// Whether both are the same store object (as Apple's store objects
    /// compare): a test compares a configuration's store with the one it set.
    public static func == (a: CredentialStore, b: CredentialStore) -> Bool { a === b }
}
