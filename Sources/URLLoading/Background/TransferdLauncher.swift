import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Connects a background session to the user's `transferd`, starting one
/// when none answers: detached from the app (its own session and process
/// group), its output appended to `transferd.log` in its state folder. The
/// app waits on a pipe for transferd to say it listens, never on a timer
/// guess (10 s at most, then a clear error).
enum TransferdLauncher {
    static func connect(_ paths: BackgroundPaths) throws(BackgroundWireError) -> UnixSocket {
        try paths.prepareRuntime()
        if let socket = try? UnixSocket.connect(path: paths.socket) { return socket }
        try start(paths)
        return try UnixSocket.connect(path: paths.socket)
    }

    private static func start(_ paths: BackgroundPaths) throws(BackgroundWireError) {
        guard let executable = BackgroundPaths.transferdExecutable() else {
            throw BackgroundWireError(
                "transferd was not found beside this program nor on PATH: install it (swift build -c release --product transferd; "
                    + "see the DocC article \"Background sessions\") or set URLLOADING_TRANSFERD")
        }
        try paths.prepareState()
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw BackgroundWireError("cannot make a pipe: \(String(cString: strerror(errno)))") }
        // Neither end leaks into other children (dup2 gives transferd its own).
        _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
        defer { close(ends[0]) }
        // transferd stays a child of ours until it exits: reaped, never a zombie.
        do {
            defer { close(ends[1]) }
            try DetachedProcess.start(
                [executable, "serve", "--ready-fd", "3"], environment: ProcessInfo.processInfo.environment, log: paths.log, passing: ends[1])
        } catch {
            throw BackgroundWireError(error.description)
        }
        var entry = pollfd(fd: ends[0], events: Int16(POLLIN), revents: 0)
        var byte: UInt8 = 0
        guard poll(&entry, 1, 10_000) > 0 else {
            throw BackgroundWireError("transferd (\(executable)) did not start listening within 10 s: see \(paths.log)")
        }
        // The pipe closed without the byte: it exited (or another transferd serves, which said so).
        guard read(ends[0], &byte, 1) == 1 else {
            throw BackgroundWireError("transferd (\(executable)) exited without listening: see \(paths.log)")
        }
    }
}
