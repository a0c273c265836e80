import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Starts a program that must outlive its parent (transferd from an app, an
/// app from transferd for its launch events): its own session and process
/// group, signals at their defaults, standard input from `/dev/null`,
/// output appended to a log file, and none of the parent's other open
/// descriptors — one kept by a child would keep a socket or pipe of the
/// parent's open after the parent is gone. Reaped by a thread of its own,
/// so never a zombie while the parent lives.
package enum DetachedProcess {
    /// glibc's `POSIX_SPAWN_SETSID` (a GNU extension Swift's Glibc module does not export).
    private static let spawnSetSID: Int32 = 0x80

    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 on), looked up
    /// at run time because Swift's Glibc module does not export it.
    private static let closeFrom: CloseFrom? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: CloseFrom.self)
    }()

    /// Starts `arguments[0]` (an absolute path) with `arguments` and
    /// `environment`; `passing` becomes the child's descriptor 3. Returns its
    /// process id; throws what `posix_spawn` said.
    @discardableResult
    package static func start(
        _ arguments: [String], environment: [String: String], log: String, passing descriptor: Int32? = nil
    ) throws(SpawnError) -> Int32 {
        guard let executable = arguments.first else { throw SpawnError(description: "no program to start") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        if let descriptor { posix_spawn_file_actions_adddup2(&actions, descriptor, 3) }
        if let closeFrom { _ = closeFrom(&actions, descriptor == nil ? 3 : 4) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(spawnSetSID | Int32(POSIX_SPAWN_SETSIGMASK) | Int32(POSIX_SPAWN_SETSIGDEF)))
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, &argv, &envp)
        guard spawned == 0 else { throw SpawnError(description: "cannot start \(executable): \(String(cString: strerror(spawned)))") }
        let child = pid
        Thread.detachNewThread {
            var status: Int32 = 0
            while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        }
        return child
    }

    /// Why a program could not be started.
    package struct SpawnError: Error, CustomStringConvertible {
        package let description: String
    }
}
