import Foundation
import Glibc

/// A SOCKS5 proxy on loopback: Debian's `microsocks`, a process of the
/// test's own, optionally asking for a user name and password (RFC 1929).
/// Its log names each connection it made for a client (`connections`), so
/// a test sees which requests went through it and to what it connected —
/// a host name when the client left the name to the proxy (`socks5h`).
public final class TestSOCKSProxy: Sendable {
    /// The port it listens on (127.0.0.1).
    public let port: Int
    private let process: ChildProcess.Running
    private let log: URL

    private init(port: Int, process: ChildProcess.Running, log: URL) {
        self.port = port
        self.process = process
        self.log = log
    }

    /// Whether `microsocks` is installed (`tools/install-deps` installs it).
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: executable.path) }
    private static let executable = URL(fileURLWithPath: "/usr/bin/microsocks")

    /// Starts the proxy and waits (bounded) until it accepts connections.
    public static func start(user: String? = nil, password: String? = nil) async throws -> TestSOCKSProxy {
        var credentials: [String] = []
        if let user, let password { credentials = ["-u", user, "-P", password] }
        // microsocks takes a port number: a port the kernel chose is let go
        // just before it binds it; a start that lost it to another test's
        // server is tried again on another.
        for _ in 0..<3 {
            let reserved = try ReservedPort()
            let port = reserved.port
            reserved.release()
            let process = try ChildProcess.start(executable, ["-i", "127.0.0.1", "-p", "\(port)"] + credentials)
            // microsocks logs to its standard error.
            let proxy = TestSOCKSProxy(port: port, process: process, log: process.errorPath)
            // Listening, and itself (a start that lost the port exits at once).
            if await eventually(within: .seconds(10 * Sanitizer.timeScale), { Loopback.accepts(port) }), Glibc.kill(process.pid, 0) == 0 {
                return proxy
            }
            await proxy.shutdown()
        }
        throw TestOriginError(message: "microsocks did not start listening")
    }

    /// What the proxy connected to for its clients, in order, as
    /// `host:port` (the name or address the client asked for).
    public var connections: [String] {
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        // "client[4] 127.0.0.1: connected to localhost:39875"
        return text.split(separator: "\n").compactMap { line in
            line.range(of: ": connected to ").map { String(line[$0.upperBound...]) }
        }
    }

    /// Ends the proxy process (and waits for it).
    public func shutdown() async {
        process.kill(SIGKILL)
        _ = try? await process.wait()
    }

    /// A test that failed before its `shutdown` leaves no process behind.
    deinit { process.kill(SIGKILL) }
}
