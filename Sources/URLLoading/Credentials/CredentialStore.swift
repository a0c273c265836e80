public import Foundation
import Logging
import Locking

/// A credential store (Apple's `URLCredentialStorage`): credentials
/// by protection space and user, with a default per space.
///
/// A store in memory (`CredentialStore()`, what ephemeral sessions get)
/// keeps everything in memory. A store opened in a directory
/// (`CredentialStore(directory:)`, what default sessions share through
/// `CredentialStore.shared`) keeps permanent credentials in one of two
/// backends (`backend`, with `backendReason` saying why):
///
/// - the desktop keyring, through the Secret Service on the session bus
///   (GNOME Keyring, KeePassXC, KWallet), encrypted and unlocked with the
///   user's login, as Apple keeps them in the Keychain;
/// - the SQLite file `Credentials.sqlite` (mode 0600 in a 0700 directory),
///   in plain text as git's `credential-store` keeps them, where no Secret
///   Service answers (servers, containers). Opening a file that group or
///   others can read fails with `StoreError.Kind.insecurePermissions`.
///
/// The choice is automatic (`BackendChoice.automatic`): the keyring when a
/// Secret Service answers and the file holds no credentials, else the
/// file; `URLLOADING_CREDENTIALS=file|keyring`, or `backend:` at opening,
/// forces one. `cachetool credentials migrate --to keyring|file` moves
/// credentials between them.
///
/// For-session credentials stay in memory for the life of the process,
/// never in a backend; credentials with persistence `.none` are never
/// stored. A change posts `Notification.Name.credentialStoreChanged`.
public final class CredentialStore: Sendable, CustomStringConvertible {
    let table: Lock<CredentialTable>
    /// Held across a change to the backend, so that backend writes happen in
    /// the order of the changes in memory without holding the table's lock.
    private let writes = Lock<Void>(())
    private let permanent: (any PermanentCredentials)?
    private let logger = Logger(label: "urlloading.credentials")
    /// The database file: nil for a store in memory or in the keyring.
    public let path: String?
    /// The directory the store was opened in; nil for a store in memory or a database.
    public let directory: URL?
    /// Where the store lives, for descriptions: a folder, a database, "memory".
    private let location: String
    /// Why the file asked for could not be opened, for `shared`, which then
    /// keeps credentials in memory only; nil otherwise.
    public let startupError: StoreError?
    /// Why the store keeps its permanent credentials where it does.
    public let backendReason: String

    /// The file name used inside a data directory.
    public static let fileName = "Credentials.sqlite"

    /// Where a store keeps its permanent credentials.
    public enum Backend: String, Sendable, CustomStringConvertible {
        /// In memory only: nothing outlives the process.
        case memory
        /// The 0600 SQLite file: passwords in plain text, as git's
        /// `credential-store` keeps them, protected by the file's mode only.
        case file
        /// The desktop keyring (the freedesktop.org Secret Service).
        case keyring
        /// A database a fleet shares (URLLoadingPostgres): passwords in a
        /// table only its role may read, in plain text there.
        case database

        /// "memory", "file (plain text)", "keyring" or "database (plain text)".
        public var description: String { keepsPlainText ? "\(rawValue) (plain text)" : rawValue }
        /// Whether permanent secrets are kept unencrypted at rest.
        public var keepsPlainText: Bool { self == .file || self == .database }
    }

    /// Where this store keeps its permanent credentials.
    public var backend: Backend { permanent?.backend ?? .memory }

    /// An empty store in memory.
    public init() {
        table = Lock(CredentialTable())
        permanent = nil
        path = nil
        directory = nil
        location = "memory"
        startupError = nil
        backendReason = "a store in memory"
    }

    /// A store in memory standing in for a file that could not be opened.
    init(fallbackFor failure: StoreError) {
        table = Lock(CredentialTable())
        permanent = nil
        path = nil
        directory = nil
        location = "memory"
        startupError = failure
        backendReason = "the store could not be opened: \(failure)"
    }

    /// Opens the store kept in `directory`, in the keyring or the file (created as needed).
    ///
    /// - Parameters:
    ///   - directory: The folder of the store's file, and the store's name
    ///     in the keyring.
    ///   - backend: `.automatic` (the default) follows
    ///     `URLLOADING_CREDENTIALS`, else chooses as the type says; `.file`
    ///     and `.keyring` force one.
    /// - Throws: `StoreError` (`.insecurePermissions` when others can read
    ///   the file, `.keyring` when the keyring was asked for and is not
    ///   there or fails, `.configuration` for an unknown
    ///   `URLLOADING_CREDENTIALS`, `.newerSchema`, `.locked`, ...).
    public convenience init(directory: URL, backend: BackendChoice = .automatic) throws(StoreError) {
        let logger = Logger(label: "urlloading.credentials")
        let opened = try Self.openBackend(directory: directory, choice: backend, environment: ProcessInfo.processInfo.environment, logger: logger)
        try self.init(directory: directory, opened: opened.backend, reason: opened.reason)
        logger.debug("credentials kept in the \(self.backend)", metadata: ["reason": "\(backendReason)", "directory": "\(directory.path)"])
    }

    /// A store over `backend` (a fleet's database: URLLoadingPostgres makes
    /// one), loaded from it; other processes' changes replace what it holds.
    package convenience init(backend: any PermanentCredentials, location: String, reason: String) throws(StoreError) {
        try self.init(directory: nil, location: location, opened: backend, reason: reason)
        backend.observeOthers { [weak self] loaded in self?.replacePermanent(loaded) }
    }

    /// A store over an opened backend, loaded from it.
    convenience init(directory: URL, opened: any PermanentCredentials, reason: String) throws(StoreError) {
        try self.init(directory: directory, location: directory.path, opened: opened, reason: reason)
    }

    private init(directory: URL?, location: String, opened: any PermanentCredentials, reason: String) throws(StoreError) {
        var loaded = CredentialTable()
        let found = try opened.load()
        loaded.add(found.credentials)
        loaded.lockedItems = found.locked
        loaded.sharedBackend = opened.isShared
        if found.locked > 0 {
            logger.warning(
                "\(found.locked) credentials are in a locked keyring; they are not used until it is unlocked (nothing prompts for it)",
                metadata: ["directory": "\(location)"])
        }
        table = Lock(loaded)
        permanent = opened
        path = (opened as? FileCredentials)?.path
        self.location = location
        self.directory = directory
        startupError = nil
        backendReason = reason
    }

    /// The application's shared store (Apple's `URLCredentialStorage.shared`):
    /// the one default sessions use, in the keyring or in `Credentials.sqlite`
    /// under `$XDG_DATA_HOME/<app>/`; in memory only when neither can be
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

    /// The credential a session uses for the space when the delegate does
    /// not choose. A credential of a keyring that was locked at opening is
    /// asked for again (bounded in time, at most every few seconds); while
    /// the keyring stays locked there is none, and a log line says why.
    public func defaultCredential(for space: ProtectionSpace) -> Credential? {
        let (found, askAgain) = table.withLock { table -> (Credential?, Bool) in
            if let credential = table.defaultCredential(for: space) { return (credential, false) }
            return (nil, table.shouldAskLockedBackend(for: space, now: Date()))
        }
        if let found { return found }
        guard askAgain, let permanent else { return nil }
        return unlockedCredential(for: space, from: permanent)
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
    /// default when `isDefault` or when the space had none. Storing what the
    /// store already holds changes nothing and posts nothing.
    public func set(_ credential: Credential, for space: ProtectionSpace, isDefault: Bool) {
        guard credential.persistence != .none else { return }
        let changed = writes.withLock { _ -> Bool in
            let change = table.withLock { $0.set(credential, for: space, isDefault: isDefault) }
            guard let change else { return false }
            // For-session credentials stay in memory (a permanent one they replace stays in the backend).
            guard credential.persistence == .permanent, let password = credential.password else { return true }
            let stored = StoredCredential(space: space, user: change.user, password: password, isDefault: change.isDefault)
            let demoted = change.demoted.flatMap { demoted -> StoredCredential? in
                guard demoted.persistence == .permanent, let demotedPassword = demoted.password else { return nil }
                return StoredCredential(space: space, user: demoted.user ?? "", password: demotedPassword, isDefault: false)
            }
            persist { (backend) throws(StoreError) in try backend.save(stored, demoting: demoted) }
            return true
        }
        if changed { postChange() }
    }

    /// Removes the user's credential for the space.
    public func remove(_ credential: Credential, for space: ProtectionSpace) {
        let user = credential.user ?? ""
        let changed = writes.withLock { _ -> Bool in
            guard table.withLock({ $0.remove(user: user, for: space) }) else { return false }
            persist { (backend) throws(StoreError) in try backend.remove(user: user, for: space) }
            return true
        }
        if changed { postChange() }
    }

    /// Removes the user's credential for the space (Apple's
    /// `remove(_:for:options:)`). The one option Apple defines,
    /// `NSURLCredentialStorageRemoveSynchronizableCredentials`, is accepted
    /// and means nothing here: no credential is synchronized across devices.
    public func remove(_ credential: Credential, for space: ProtectionSpace, options: [String: Any]?) {
        remove(credential, for: space)
    }

    /// Removes every credential.
    public func removeAll() {
        let changed = writes.withLock { _ -> Bool in
            let hadAny = table.withLock { table in
                defer { table = CredentialTable() }
                return !table.spaces.isEmpty || table.lockedItems > 0
            }
            guard hadAny else { return false }
            persist { (backend) throws(StoreError) in try backend.removeAll() }
            return true
        }
        if changed { postChange() }
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

    /// Writes a change to the backend, if any; a failure is logged (never
    /// with the credential) and the change stays in memory for this process.
    private func persist(_ body: (any PermanentCredentials) throws(StoreError) -> Void) {
        guard let permanent else { return }
        do throws(StoreError) {
            try body(permanent)
        } catch {
            logger.error("credential store write failed; the change is kept in memory only", metadata: ["error": "\(error)"])
        }
    }

    /// Asks a keyring that held locked items again for a space's credentials.
    private func unlockedCredential(for space: ProtectionSpace, from permanent: any PermanentCredentials) -> Credential? {
        let found: LoadedCredentials
        do throws(StoreError) {
            found = try permanent.load(space)
        } catch {
            logger.warning(
                "the keyring did not answer; the challenge goes on without a stored credential", metadata: ["host": "\(space.host)", "error": "\(error)"])
            return nil
        }
        if found.credentials.isEmpty && found.locked > 0 {
            logger.warning(
                "the locked keyring may hold a credential for this space; nothing prompts to unlock it, so the challenge goes on without one",
                metadata: ["host": "\(space.host)"])
        }
        return table.withLock { table in
            table.add(found.credentials.filter { table.spaces[$0.space]?[$0.user] == nil })
            return table.defaultCredential(for: space)
        }
    }

    /// Another process changed the shared backend: its permanent credentials
    /// replace the ones in memory (for-session ones stay).
    private func replacePermanent(_ loaded: LoadedCredentials) {
        table.withLock { $0.replacePermanent(with: loaded.credentials) }
        postChange()
    }

    private func postChange() {
        NotificationCenter.default.post(name: .credentialStoreChanged, object: self)
    }

    /// Where the store lives, its backend and the number of spaces, never a credential.
    public var description: String {
        "CredentialStore(\(path ?? location), \(backend), \(table.withLock { $0.spaces.count }) spaces)"
    }
}

extension Notification.Name {
    /// Posted (object: the `CredentialStore`) after a credential is stored
    /// or removed; Apple's `NSURLCredentialStorageChanged`, whose name it has.
    public static let credentialStoreChanged = Notification.Name("NSURLCredentialStorageChangedNotification")
}

/// The in-memory core of every store.
struct CredentialTable: Sendable {
    var spaces: [ProtectionSpace: [String: Credential]] = [:]
    var defaults: [ProtectionSpace: String] = [:]
    /// How many items a keyring held locked at opening (their spaces unknown).
    var lockedItems = 0
    /// The backend is a fleet's: other processes may have stored what is missing here.
    var sharedBackend = false
    /// When a space missing from memory was last asked of a keyring that held locked items.
    var lastLockedAttempt: [ProtectionSpace: Date] = [:]

    /// How long a space is not asked of a locked keyring again.
    static let lockedRetryInterval: TimeInterval = 10

    /// What `set` changed.
    struct Change {
        var user: String
        var isDefault: Bool
        /// The space's earlier default, when the new credential took its place.
        var demoted: Credential?
    }

    /// The space's default: the first credential stored for it, or the one
    /// last set as default. Once the default is removed the space has none,
    /// as with Apple's store, until a credential is stored for it again.
    func defaultCredential(for space: ProtectionSpace) -> Credential? {
        defaults[space].flatMap { spaces[space]?[$0] }
    }

    /// Whether to ask the backend for a space missing from memory: only
    /// when it held locked items, and not again within the retry interval.
    mutating func shouldAskLockedBackend(for space: ProtectionSpace, now: Date) -> Bool {
        guard lockedItems > 0 || sharedBackend else { return false }
        if let last = lastLockedAttempt[space], now.timeIntervalSince(last) < Self.lockedRetryInterval { return false }
        lastLockedAttempt[space] = now
        return true
    }

    /// Puts `credentials` in place of every permanent credential held.
    mutating func replacePermanent(with credentials: [StoredCredential]) {
        for (space, users) in spaces {
            for (user, credential) in users where credential.persistence == .permanent { _ = remove(user: user, for: space) }
        }
        add(credentials)
    }

    /// Adds permanent credentials as a backend gave them.
    mutating func add(_ credentials: [StoredCredential]) {
        for entry in credentials {
            _ = set(Credential(user: entry.user, password: entry.password, persistence: .permanent), for: entry.space, isDefault: entry.isDefault)
        }
    }

    /// Stores the credential; nil when the table held exactly this already.
    mutating func set(_ credential: Credential, for space: ProtectionSpace, isDefault: Bool) -> Change? {
        let user = credential.user ?? ""
        let earlier = spaces[space]?[user]
        let earlierDefault = defaults[space]
        let becomesDefault = isDefault || earlierDefault == nil
        if earlier == credential, !becomesDefault || earlierDefault == user { return nil }
        spaces[space, default: [:]][user] = credential
        if becomesDefault { defaults[space] = user }
        let demoted = becomesDefault && earlierDefault != user ? earlierDefault.flatMap { spaces[space]?[$0] } : nil
        return Change(user: user, isDefault: defaults[space] == user, demoted: demoted)
    }

    /// Removes the user's credential; false when there was none.
    mutating func remove(user: String, for space: ProtectionSpace) -> Bool {
        let had = spaces[space]?[user] != nil
        spaces[space]?[user] = nil
        if spaces[space]?.isEmpty == true { spaces[space] = nil }
        if defaults[space] == user { defaults[space] = nil }
        return had
    }
}

extension CredentialStore: Equatable {
    /// Whether both are the same store object (as Apple's store objects
    /// compare): a test compares a configuration's store with the one it set.
    public static func == (a: CredentialStore, b: CredentialStore) -> Bool { a === b }
}
