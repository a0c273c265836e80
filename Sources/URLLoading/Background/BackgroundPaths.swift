import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where `transferd` and background sessions meet, and where `transferd`
/// keeps its journal, files and log:
///
/// - the socket: `$XDG_RUNTIME_DIR/urlloading/transferd.sock` in a 0700
///   folder (`/tmp/urlloading-<uid>/` when `XDG_RUNTIME_DIR` is unset or not
///   absolute; refused when another user made it first);
/// - the journal and files: `$XDG_DATA_HOME/urlloading/transferd/`
///   (else `~/.local/share/urlloading/transferd/`), 0700;
/// - the log: `$XDG_STATE_HOME/urlloading/transferd.log` (else under
///   `~/.local/state/`), in a 0700 folder.
package struct BackgroundPaths: Sendable, Equatable {
    package var runtimeDirectory: String
    /// The journal and the transfers' files.
    package var dataDirectory: String
    /// The log.
    package var stateDirectory: String

    package init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            runtimeDirectory = runtime + "/urlloading"
        } else {
            runtimeDirectory = "/tmp/urlloading-\(getuid())"
        }
        let home = environment["HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? NSHomeDirectory()
        let data = environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.local/share"
        dataDirectory = data + "/urlloading/transferd"
        let state = environment["XDG_STATE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.local/state"
        stateDirectory = state + "/urlloading"
    }

    package var socket: String { runtimeDirectory + "/transferd.sock" }
    /// Held (flock) by the one running `transferd`.
    package var lockFile: String { runtimeDirectory + "/transferd.lock" }
    package var journal: String { dataDirectory + "/Journal.sqlite" }
    /// Partial and finished downloads, and copies of upload bodies.
    package var files: String { dataDirectory + "/files" }
    package var log: String { stateDirectory + "/transferd.log" }

    /// Makes the runtime folder (0700, checked).
    package func prepareRuntime() throws(BackgroundWireError) {
        if let problem = PrivateDirectory.ensure(runtimeDirectory, what: "transferd socket folder", parents: true) {
            throw BackgroundWireError(problem)
        }
    }

    /// Makes the data and log folders (0700, checked).
    package func prepareState() throws(BackgroundWireError) {
        if let problem = PrivateDirectory.ensure(dataDirectory, what: "transferd data folder", parents: true)
            ?? PrivateDirectory.ensure(files, what: "transferd file folder")
            ?? PrivateDirectory.ensure(stateDirectory, what: "transferd log folder", parents: true)
        {
            throw BackgroundWireError(problem)
        }
    }

    /// The `transferd` to start: `URLLOADING_TRANSFERD` when set, else the
    /// one beside the running executable, else the first on `PATH`.
    package static func transferdExecutable(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        if let given = environment["URLLOADING_TRANSFERD"], given.hasPrefix("/") { return given }
        let me = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("transferd").path
        if access(me, X_OK) == 0 { return me }
        for folder in (environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") where folder.hasPrefix("/") {
            let candidate = "\(folder)/transferd"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }
}
