public import Foundation
import Logging
import Migrations
import Storage
import Locking

/// A credential store (Apple's `URLCredentialStorage`, SPEC A1): credentials
/// by protection space and user, with a default per space.
///
/// `MemoryCredentialStore` keeps everything in memory (ephemeral sessions);
/// `PersistentCredentialStore` writes permanent credentials to an SQLite
/// file readable by the owner only and keeps for-session ones in memory.
/// Credentials with persistence `.none` are never stored.
public protocol CredentialStore: AnyObject, Sendable {
    /// The credentials of a space, by user name.
    func credentials(for space: ProtectionSpace) -> [String: Credential]
    /// Every space and its credentials.
    var allCredentials: [ProtectionSpace: [String: Credential]] { get }
    /// The credential a session uses for the space when the delegate does not choose.
    func defaultCredential(for space: ProtectionSpace) -> Credential?
    /// Stores a credential (replacing the user's earlier one), as the space's
    /// default when `isDefault` or when the space had none.
    func set(_ credential: Credential, for space: ProtectionSpace, isDefault: Bool)
    /// Removes the user's credential for the space.
    func remove(_ credential: Credential, for space: ProtectionSpace)
    /// Removes every credential.
    func removeAll()
}

extension CredentialStore {
    /// Stores a credential; it becomes the default if the space had none.
    public func set(_ credential: Credential, for space: ProtectionSpace) {
        set(credential, for: space, isDefault: false)
    }

    /// Stores a credential as the space's default.
    public func setDefaultCredential(_ credential: Credential, for space: ProtectionSpace) {
        set(credential, for: space, isDefault: true)
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
}

/// `~/.netrc` (the format curl, ftp and git read): `machine`, `login`,
/// `password` tokens; `default` entries and `macdef` blocks are skipped.
enum Netrc {
    struct Entry: Equatable { var machine: String; var login: String; var password: String }

    static func parse(_ text: String) -> [Entry] {
        var entries: [Entry] = []
        var current: (machine: String?, login: String?, password: String?)?
        func flush() {
            if let entry = current, let machine = entry.machine, let login = entry.login {
                entries.append(Entry(machine: machine.lowercased(), login: login, password: entry.password ?? ""))
            }
            current = nil
        }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)[...]
        var tokens: [Substring] = []
        while let line = lines.popFirst() {
            if line.hasPrefix("macdef") || line.contains(where: { $0 == "\0" }) {
                // A macro runs to the next empty line.
                while let next = lines.popFirst(), !next.trimmingCharacters(in: .whitespaces).isEmpty {}
                continue
            }
            if line.trimmingCharacters(in: .whitespaces).hasPrefix("#") { continue }
            tokens += line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
        }
        var index = 0
        while index < tokens.count {
            let token = tokens[index]
            let value = index + 1 < tokens.count ? String(tokens[index + 1]) : nil
            switch token {
            case "machine":
                flush()
                current = (value, nil, nil)
                index += 2
            case "default":
                flush()
                current = (nil, nil, nil)
                index += 1
            case "login":
                current?.login = value
                index += 2
            case "password":
                current?.password = value
                index += 2
            case "account", "port":
                index += 2
            default:
                index += 1
            }
        }
        flush()
        return entries
    }
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

/// A credential store in memory only: what ephemeral sessions use, private
/// to the session and gone with it.
public final class MemoryCredentialStore: CredentialStore, CustomStringConvertible {
    private let table = Lock(CredentialTable())

    /// An empty store.
    public init() {}

    public func credentials(for space: ProtectionSpace) -> [String: Credential] {
        table.withLock { $0.spaces[space] ?? [:] }
    }

    public var allCredentials: [ProtectionSpace: [String: Credential]] { table.withLock { $0.spaces } }

    public func defaultCredential(for space: ProtectionSpace) -> Credential? {
        table.withLock { $0.defaultCredential(for: space) }
    }

    public func set(_ credential: Credential, for space: ProtectionSpace, isDefault: Bool) {
        guard credential.persistence != .none else { return }
        table.withLock { _ = $0.set(credential, for: space, isDefault: isDefault) }
    }

    public func remove(_ credential: Credential, for space: ProtectionSpace) {
        table.withLock { $0.remove(user: credential.user ?? "", for: space) }
    }

    public func removeAll() { table.withLock { $0 = CredentialTable() } }

    /// The number of spaces, never a credential.
    public var description: String { "MemoryCredentialStore(\(table.withLock { $0.spaces.count }) spaces)" }
}

/// A credential store whose permanent credentials live in an SQLite file
/// (`Credentials.sqlite`, mode 0600 in a 0700 directory); for-session
/// credentials stay in memory for the life of the process. Opening a file
/// that group or others can read fails with `StoreError.Kind.insecurePermissions`.
public final class PersistentCredentialStore: CredentialStore, CustomStringConvertible {
    private let table: Lock<CredentialTable>
    private let database: Database
    private let logger = Logger(label: "urlloading.credentials")
    /// The database file.
    public let path: String

    /// The file name used inside a data directory.
    public static let fileName = "Credentials.sqlite"

    /// Opens (creating as needed) the store in `directory`.
    ///
    /// - Throws: `StoreError` (`.insecurePermissions` when others can read
    ///   the file, `.newerSchema`, `.locked`, ...).
    public init(directory: URL) throws {
        path = directory.appendingPathComponent(Self.fileName).path
        var options = Database.Options()
        options.fileMode = 0o600
        options.directoryMode = 0o700
        options.requirePrivateFile = true
        options.onCorruption = .moveAside
        options.logger = logger
        do {
            database = try Database(path: path, migrations: Schema.credentials, options: options)
            var loaded = CredentialTable()
            let rows = try database.read { connection in
                try connection.query("SELECT host, port, protocol, realm, method, is_proxy, user, password, is_default FROM credentials") { row in
                    (ProtectionSpace(
                        host: row.text(0) ?? "", port: row.int(1), protocol: row.text(2) ?? "",
                        realm: (row.text(3) ?? "").isEmpty ? nil : row.text(3),
                        authenticationMethod: .init(rawValue: row.text(4) ?? "default"), isProxy: row.int64(5) != 0),
                     Credential(user: row.text(6) ?? "", password: row.text(7) ?? "", persistence: .permanent), row.int64(8) != 0)
                }
            }
            for (space, credential, isDefault) in rows { _ = loaded.set(credential, for: space, isDefault: isDefault) }
            table = Lock(loaded)
        } catch {
            throw StoreError.wrapping(error, path: path)
        }
    }

    public func credentials(for space: ProtectionSpace) -> [String: Credential] {
        table.withLock { $0.spaces[space] ?? [:] }
    }

    public var allCredentials: [ProtectionSpace: [String: Credential]] { table.withLock { $0.spaces } }

    public func defaultCredential(for space: ProtectionSpace) -> Credential? {
        table.withLock { $0.defaultCredential(for: space) }
    }

    public func set(_ credential: Credential, for space: ProtectionSpace, isDefault: Bool) {
        guard credential.persistence != .none else { return }
        table.withLock { table in
            let becameDefault = table.set(credential, for: space, isDefault: isDefault)
            guard credential.persistence == .permanent, let user = credential.user, let password = credential.password else { return }
            write { connection in
                if becameDefault {
                    try connection.run("UPDATE credentials SET is_default = 0 WHERE \(Self.spaceMatch)", Self.spaceValues(space))
                }
                try connection.run("""
                    INSERT OR REPLACE INTO credentials(host, port, protocol, realm, method, is_proxy, user, password, is_default, created)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, Self.spaceValues(space) + [.text(user), .text(password), .integer(becameDefault ? 1 : 0), .real(Date().timeIntervalSince1970)])
            }
        }
    }

    public func remove(_ credential: Credential, for space: ProtectionSpace) {
        let user = credential.user ?? ""
        table.withLock { table in
            table.remove(user: user, for: space)
            write { connection in
                try connection.run("DELETE FROM credentials WHERE \(Self.spaceMatch) AND user = ?", Self.spaceValues(space) + [.text(user)])
            }
        }
    }

    public func removeAll() {
        table.withLock { table in
            table = CredentialTable()
            write { connection in try connection.run("DELETE FROM credentials") }
        }
    }

    private static let spaceMatch = "host = ? AND port = ? AND protocol = ? AND realm = ? AND method = ? AND is_proxy = ?"

    private static func spaceValues(_ space: ProtectionSpace) -> [SQLiteValue] {
        [.text(space.host), .integer(Int64(space.port)), .text(space.protocol), .text(space.realm ?? ""),
         .text(space.authenticationMethod.rawValue), .integer(space.isProxy ? 1 : 0)]
    }

    /// Writes a change; a failure is logged (never with the credential) and
    /// the change stays in memory for this process.
    private func write(_ body: (Connection) throws -> Void) {
        do {
            try database.write { connection in try body(connection) }
        } catch {
            logger.error("credential store write failed; the change is kept in memory only",
                         metadata: ["error": "\(StoreError.wrapping(error, path: path))"])
        }
    }

    /// The file and the number of spaces, never a credential.
    public var description: String { "PersistentCredentialStore(\(path), \(table.withLock { $0.spaces.count }) spaces)" }
}
