import Foundation
import Glibc

/// TLS in front of a plain TCP server on loopback: Debian's `socat`, a
/// process of the test's own, terminating TLS with the test server
/// identity (issued for `localhost` and `127.0.0.1`) and passing each
/// connection's bytes on to `127.0.0.1:<target>`. In front of `TestProxy`
/// it makes an HTTPS proxy (TLS between client and proxy).
public final class TestTLSFront: Sendable {
    /// The port it listens on (127.0.0.1).
    public let port: Int
    private let process: ChildProcess.Running

    private init(port: Int, process: ChildProcess.Running) {
        self.port = port
        self.process = process
    }

    /// Whether `socat` is installed (`tools/install-deps` installs it).
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: executable.path) }
    private static let executable = URL(fileURLWithPath: "/usr/bin/socat")

    /// Starts the front for `target` and waits (bounded) until it accepts connections.
    public static func start(target: Int, identity: TestCertificates.ServerIdentity) async throws -> TestTLSFront {
        for _ in 0..<3 {
            // socat takes a port number: one the kernel chose is let go just
            // before socat binds it; a start that lost it is tried again.
            let reserved = try ReservedPort()
            let port = reserved.port
            reserved.release()
            let listen =
                "OPENSSL-LISTEN:\(port),bind=127.0.0.1,reuseaddr,fork,verify=0,"
                + "cert=\(identity.certificatePath),key=\(identity.privateKeyPath)"
            let process = try ChildProcess.start(executable, ["-d", listen, "TCP:127.0.0.1:\(target)"])
            let front = TestTLSFront(port: port, process: process)
            if await eventually(within: .seconds(10 * Sanitizer.timeScale), { Loopback.accepts(port) }), Glibc.kill(process.pid, 0) == 0 {
                return front
            }
            await front.shutdown()
        }
        throw TestOriginError(message: "socat did not start listening")
    }

    /// Ends the front process (and waits for it).
    public func shutdown() async {
        process.kill(SIGKILL)
        _ = try? await process.wait()
    }

    /// A test that failed before its `shutdown` leaves no process behind.
    deinit { process.kill(SIGKILL) }
}

/// Probes of loopback ports.
enum Loopback {
    /// Whether a connection to `127.0.0.1:port` is accepted now (closed at once).
    static func accepts(_ port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = in_addr_t(0x7f00_0001).bigEndian
        address.sin_port = in_port_t(UInt16(port)).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// Whether a connection to the Unix-domain socket at `path` is accepted now (closed at once).
    static func accepts(socketPath path: String) -> Bool {
        let socket = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 }
        }
    }
}
