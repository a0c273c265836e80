import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
import TestSupport
import TransferDaemon
import URLLoading

/// transferd under systemd's socket activation: started
/// the way systemd starts it, and the unit files shipped in `dist/systemd`.
@Suite("transferd socket activation", .serialized, .timeLimit(.minutes(Sanitizer.minutes(2))))
struct SocketActivationTests {
    /// What systemd does, in a few lines of Debian's python3: bind and
    /// listen on the socket's path, put the socket at descriptor 3, set
    /// LISTEN_FDS=1 and LISTEN_PID to this process, exec transferd.
    static let launcher = """
        import os, socket, sys
        path, transferd, log = sys.argv[1], sys.argv[2], sys.argv[3]
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        os.makedirs(os.path.dirname(log), mode=0o700, exist_ok=True)
        # transferd's standard error is its log, as under systemd's journal.
        os.dup2(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), 2)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        os.chmod(path, 0o600)
        listener.listen(16)
        if listener.fileno() != 3:
            os.dup2(listener.fileno(), 3)
        os.set_inheritable(3, True)
        os.environ["LISTEN_FDS"] = "1"
        os.environ["LISTEN_PID"] = str(os.getpid())
        os.execv(transferd, [transferd, "serve", "--idle-exit", "120"])
        """

    static func inode(_ path: String) -> UInt64? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return UInt64(status.st_ino)
    }

    @Test("transferd handed a listening socket as descriptor 3 with LISTEN_FDS=1 serves the first client on it, and keeps the socket it was given")
    func activated() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/small", response: ScriptedResponse(body: "served by an activated transferd"))
        let world = BackgroundSessionProcessTests.World()
        // No on-demand start: only the activated transferd can serve the app.
        world.extraEnvironment["URLLOADING_TRANSFERD"] = world.directory.path("no-such-transferd")
        let script = world.directory.path("activate.py")
        try Data(Self.launcher.utf8).write(to: URL(fileURLWithPath: script))
        let transferd = ChildProcess.productsDirectory.appendingPathComponent("transferd").path
        let paths = world.paths
        let daemon = try ChildProcess.start(URL(fileURLWithPath: "/usr/bin/python3"), [script, paths.socket, transferd, paths.log], environment: world.environment)
        defer { daemon.kill(SIGKILL) }
        #expect(await eventually { world.transferdPID != nil && Self.inode(paths.socket) != nil }, "\(world.log)")
        let given = Self.inode(paths.socket)

        let lines = try await world.run(["activated", "download", origin.url("/small").absoluteString])
        #expect(lines.contains("complete 1 nil status 200"), "\(lines)\n\(world.log)")
        #expect(Self.inode(paths.socket) == given, "transferd bound a socket of its own")
        #expect(world.transferdPID == daemon.pid, "the launcher's process is transferd")
        #expect(world.log.contains("(socket activation)"), "\(world.log)")
        try await origin.shutdown()
    }

    @Test("LISTEN_PID naming another process, no descriptor or a number too long is no activation; only a listening Unix stream socket is taken")
    func notActivated() throws {
        #expect(Daemon.activatedListener(environment: ["LISTEN_PID": "\(getpid() + 1)", "LISTEN_FDS": "1"]) == nil)
        #expect(Daemon.activatedListener(environment: ["LISTEN_PID": "\(getpid())", "LISTEN_FDS": "0"]) == nil)
        #expect(Daemon.activatedListener(environment: ["LISTEN_PID": "99999999999999", "LISTEN_FDS": "1"]) == nil)
        // What descriptor 3 must be, checked on descriptors of this test's own
        // (replacing this process's descriptor 3 could break a test running beside it).
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        defer { ends.forEach { close($0) } }
        #expect(!Daemon.isListeningUnixStream(ends[0]))
        let directory = TemporaryDirectory("activation")
        let listening = try UnixSocket.listen(path: directory.path("listening.sock"))
        #expect(Daemon.isListeningUnixStream(listening.descriptor))
        let unbound = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(unbound) }
        #expect(!Daemon.isListeningUnixStream(unbound))
        let tcp = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(tcp) }
        #expect(listen(tcp, 1) == 0 && !Daemon.isListeningUnixStream(tcp))
    }

    @Test("The shipped unit files pass systemd-analyze verify (where systemd is installed)")
    func unitFiles() async throws {
        let analyze = "/usr/bin/systemd-analyze"
        guard FileManager.default.isExecutableFile(atPath: analyze) else {
            print("transferd units: systemd-analyze is not installed here; the unit files were not verified")
            return
        }
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("dist/systemd")
        let directory = TemporaryDirectory("units")
        let runtime = directory.path("runtime")
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var units: [String] = []
        for name in ["transferd.socket", "transferd.service"] {
            var text = try String(contentsOf: source.appendingPathComponent(name), encoding: .utf8)
            // verify checks that the command exists: the built transferd stands in for ~/.local/bin's.
            let built = ChildProcess.productsDirectory.appendingPathComponent("transferd").path
            text = text.replacingOccurrences(of: "%h/.local/bin/transferd", with: built)
            let path = directory.path(name)
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            units.append(path)
        }
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_RUNTIME_DIR"] = runtime
        let result = try await ChildProcess.run(URL(fileURLWithPath: analyze), ["--user", "verify"] + units, environment: environment)
        #expect(result.status == 0 && result.standardError.isEmpty && result.standardOutput.isEmpty, "\(result.standardOutput)\(result.standardError)")
    }
}
