import Storage

/// Why a persistent store (cache, cookies, credentials) could not be used.
///
/// A struct with a kind and a message a person can act on; it names the file
/// concerned but never the URLs, cookie values or secrets inside it.
public struct StoreError: Error, CustomStringConvertible, Sendable {
    /// The broad reason, stable for callers to branch on.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// No store exists at the path.
        public static let notFound = Kind("not found")
        /// Another process holds the store's write lock for longer than the busy timeout.
        public static let locked = Kind("locked")
        /// The file is damaged or is not a store of this kind.
        public static let corrupt = Kind("corrupt")
        /// The store was written by a newer version of URLLoading.
        public static let newerSchema = Kind("newer schema")
        /// A private store's file is readable by other users.
        public static let insecurePermissions = Kind("insecure permissions")
        /// The disk is full.
        public static let diskFull = Kind("disk full")
        /// The desktop keyring (the Secret Service) is not there, is locked,
        /// or failed or did not answer in time.
        public static let keyring = Kind("keyring")
        /// A configuration value (or the environment variable standing for
        /// one) has a value the store does not know.
        public static let configuration = Kind("configuration")
        /// Any other failure of the file system or SQLite.
        public static let ioError = Kind("I/O error")

        /// The kind's name.
        public var description: String { name }
    }

    /// The broad reason.
    public let kind: Kind
    /// What happened and what to do about it.
    public let message: String
    /// The file or directory concerned.
    public let path: String?

    /// Creates an error.
    public init(kind: Kind, message: String, path: String?) {
        self.kind = kind
        self.message = message
        self.path = path
    }

    /// The message, followed by the path.
    public var description: String {
        path.map { "\(message) [\($0)]" } ?? message
    }

    /// A storage error's message and cause, without its path (the store
    /// error shows the path once).
    private static func withoutPath(_ error: StorageError) -> String {
        error.underlying.map { "\(error.message) (\($0))" } ?? error.message
    }

    /// The storage layer's error in this public shape (SQLite's cause
    /// decides between locked, full, damaged and other failures).
    init(_ error: StorageError, path: String) {
        let path = error.path ?? path
        switch error.kind {
        case .newerSchema:
            self.init(kind: .newerSchema, message: error.message, path: path)
        case .corrupt, .unknownMigration:
            self.init(kind: .corrupt, message: Self.withoutPath(error), path: path)
        case .fileAccessibleByOthers:
            self.init(kind: .insecurePermissions, message: error.message, path: path)
        case .sqlite where error.isBusy:
            self.init(kind: .locked, message: "another process holds the store's lock; retry when it is done (\(error.message))", path: path)
        case .sqlite where error.isFull:
            self.init(kind: .diskFull, message: "the disk is full (\(error.message))", path: path)
        default:
            self.init(kind: .ioError, message: Self.withoutPath(error), path: path)
        }
    }

    /// A file system failure around a store (its folder, a body file).
    static func fileSystem(_ what: String, _ error: any Error, path: String) -> StoreError {
        StoreError(kind: .ioError, message: "\(what): \(error.localizedDescription)", path: path)
    }
}
