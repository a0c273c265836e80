import Foundation
import Logging

extension CredentialStore {
    /// Which backend a store opened in a directory keeps its permanent
    /// credentials in.
    public enum BackendChoice: String, Sendable, CaseIterable {
        /// `URLLOADING_CREDENTIALS` when set; else the keyring when a Secret
        /// Service answers on the session bus and the file holds no
        /// credentials, else the file.
        case automatic
        /// The 0600 SQLite file, whatever the session bus offers.
        case file
        /// The desktop keyring; opening fails when no Secret Service answers.
        case keyring
    }

    /// The environment variable that forces a backend for stores opened
    /// with `.automatic`: `file`, `keyring` (or `automatic`).
    public static let backendEnvironmentVariable = "URLLOADING_CREDENTIALS"

    /// The bound on each call to the keyring: a lookup in a locked keyring
    /// returns "no credential" within it.
    static let keyringTimeout: TimeInterval = 1.5

    /// Opens the backend the choice names, with the reason for it.
    static func openBackend(
        directory: URL, choice: BackendChoice, environment: [String: String], logger: Logger
    ) throws(StoreError) -> (backend: any PermanentCredentials, reason: String) {
        let filePath = directory.appendingPathComponent(fileName).path
        var choice = choice
        var forcedBy = "backend: .\(choice.rawValue)"
        if choice == .automatic, let value = environment[backendEnvironmentVariable], !value.isEmpty {
            guard let forced = BackendChoice(rawValue: value.lowercased()) else {
                throw StoreError(
                    kind: .configuration,
                    message: "\(backendEnvironmentVariable) is \"\(value.prefix(40))\"; it takes file, keyring or automatic", path: nil)
            }
            choice = forced
            forcedBy = "\(backendEnvironmentVariable)=\(forced.rawValue)"
        }
        switch choice {
        case .file:
            return (try FileCredentials(path: filePath, logger: logger), "forced by \(forcedBy)")
        case .keyring:
            if let why = SecretServiceKeyring.unavailability(environment: environment, timeout: keyringTimeout) {
                throw StoreError(kind: .keyring, message: "\(forcedBy) asks for the keyring, and \(why)", path: nil)
            }
            return (keyring(directory), "forced by \(forcedBy)")
        case .automatic:
            if FileManager.default.fileExists(atPath: filePath) {
                let file = try FileCredentials(path: filePath, logger: logger)
                let count = try file.count()
                if count > 0 {
                    return (
                        file,
                        "the file holds \(count) credentials (`cachetool credentials migrate --to keyring` moves them to the keyring)"
                    )
                }
            }
            guard let why = SecretServiceKeyring.unavailability(environment: environment, timeout: keyringTimeout) else {
                return (keyring(directory), "a Secret Service answered on the session bus")
            }
            return (try FileCredentials(path: filePath, logger: logger), why)
        }
    }

    /// The keyring backend for a store in `directory`.
    /// The folder is made (0700) as for the file, so that a store in the
    /// keyring has its folder too (transferd checks it before use).
    static func keyring(_ directory: URL) -> KeyringCredentials {
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return KeyringCredentials(keyring: SecretServiceKeyring(scope: directory.standardizedFileURL.path, timeout: keyringTimeout))
    }
}
