public import Foundation
import Glibc

/// Debian's nginx as an origin of the test's own, serving a folder's files
/// on a Unix-domain socket — a server written by others, as the Docker
/// and systemd APIs a client reaches that way are. One process (no master
/// and workers, so that ending it leaves none behind); its access log
/// names each request with the Host it carried.
public final class TestNginx: Sendable {
    /// The socket it listens on.
    public let socketPath: String
    /// What it serves: a file `name` in it is `/name`.
    public let root: URL
    private let directory: URL
    private let process: ChildProcess.Running

    private init(socketPath: String, root: URL, directory: URL, process: ChildProcess.Running) {
        self.socketPath = socketPath
        self.root = root
        self.directory = directory
        self.process = process
    }

    /// Whether nginx is installed (`tools/install-deps` installs it).
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: executable.path) }
    private static let executable = URL(fileURLWithPath: "/usr/sbin/nginx")

    /// Starts nginx on `socketPath` (which must not exist) and waits,
    /// bounded, until it accepts connections there.
    public static func start(socketPath: String) async throws -> TestNginx {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("nginx-\(UUID().uuidString.prefix(8))", isDirectory: true)
        let root = directory.appendingPathComponent("www", isDirectory: true)
        let temporary = directory.appendingPathComponent("tmp", isDirectory: true)
        for folder in [root, temporary] { try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true) }
        let path = directory.path
        let configuration = """
            daemon off;
            master_process off;
            worker_processes 1;
            error_log \(path)/error.log error;
            pid \(path)/nginx.pid;
            events { worker_connections 64; }
            http {
              log_format requests '$request_method $request_uri host=$http_host';
              access_log \(path)/access.log requests;
              client_body_temp_path \(path)/tmp; proxy_temp_path \(path)/tmp; fastcgi_temp_path \(path)/tmp;
              uwsgi_temp_path \(path)/tmp; scgi_temp_path \(path)/tmp;
              server { listen unix:\(socketPath); root \(root.path); }
            }
            """
        try configuration.write(to: directory.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
        let process = try ChildProcess.start(executable, ["-c", "\(path)/nginx.conf", "-p", path, "-e", "\(path)/error.log"])
        let nginx = TestNginx(socketPath: socketPath, root: root, directory: directory, process: process)
        guard await eventually(within: .seconds(10 * Sanitizer.timeScale), { Loopback.accepts(socketPath: socketPath) }) else {
            let errors = (try? String(contentsOf: directory.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
            await nginx.shutdown()
            throw TestOriginError(message: "nginx did not start listening on \(socketPath): \(errors)")
        }
        return nginx
    }

    /// Puts `contents` at `/name`.
    public func serve(_ name: String, _ contents: Data) throws {
        try contents.write(to: root.appendingPathComponent(name))
    }

    /// The requests nginx answered, in order: "METHOD /path host=HOST".
    public var requests: [String] {
        let text = (try? String(contentsOf: directory.appendingPathComponent("access.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init)
    }

    /// Ends nginx (and waits for it); removes its folder and socket.
    public func shutdown() async {
        process.kill(SIGKILL)
        _ = try? await process.wait()
        try? FileManager.default.removeItem(at: directory)
        try? FileManager.default.removeItem(atPath: socketPath)
    }

    /// A test that failed before its `shutdown` leaves no process behind.
    deinit { process.kill(SIGKILL) }

}
