import Foundation
import Testing
import TestSupport
@testable import URLLoading

/// The credential store's Secret Service backend (issue 37) against a real
/// Secret Service: Debian's gnome-keyring-daemon, started under
/// dbus-run-session with a test keyring unlocked from a known password; the
/// test helper makes the calls, each in a process of its own, and
/// `secret-tool` (another client) reads what they left.
@Suite(.serialized, .timeLimit(.minutes(Sanitizer.minutes(2))))
struct KeyringTests {
    static let tools = ["/usr/bin/dbus-run-session", "/usr/bin/gnome-keyring-daemon", "/usr/bin/secret-tool"]

    /// Runs `steps` (shell lines; `$H` is the helper) in a new D-Bus session
    /// with an unlocked keyring in `home`; nil (said in one line) when the
    /// tools are not installed.
    /// With `unlocked` false the daemon starts without the password: the
    /// keyring a first session made stays locked.
    static func session(_ steps: String, home: TemporaryDirectory, unlocked: Bool = true) async throws -> [String]? {
        guard tools.allSatisfy(FileManager.default.isExecutableFile(atPath:)) else {
            print("keyring: dbus-run-session, gnome-keyring-daemon or secret-tool is not installed; the keyring tests did not run")
            return nil
        }
        let script = """
            set -u
            export HOME="$1" XDG_DATA_HOME="$1/data" XDG_RUNTIME_DIR="$1/run" XDG_CONFIG_HOME="$1/config"
            mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
            H="$2"
            \(unlocked ? "printf 'test-keyring-password' | gnome-keyring-daemon --unlock" : "gnome-keyring-daemon </dev/null") --components=secrets --daemonize >/dev/null 2>&1
            \(steps)
            # The daemon belongs to this session; it ends with it, and now.
            pkill -KILL -u "$(id -u)" -f "gnome-keyring-daemon.*--components=secrets" 2>/dev/null || true
            """
        let path = home.path("steps.sh")
        try Data(script.utf8).write(to: URL(fileURLWithPath: path))
        var environment = ProcessInfo.processInfo.environment
        environment["URLLOADING_KEYRING_TIMEOUT"] = "\(3 * Sanitizer.timeScale)"
        environment.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        // The test process's blocked signals would reach the bus daemon, which then
        // outlives dbus-run-session's SIGTERM: the mask is cleared before the exec.
        let unblocked = "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, set()); os.execv(sys.argv[1], sys.argv[1:])"
        let result = try await ChildProcess.run(
            URL(fileURLWithPath: "/usr/bin/python3"),
            ["-c", unblocked, "/usr/bin/dbus-run-session", "--", "/bin/sh", path, home.path("home"), ChildProcess.helper.path],
            environment: environment)
        return result.standardOutput.split(separator: "\n").map(String.init)
    }

    @Test("Stored through the library: visible to secret-tool with the documented attributes and label, found by a new process, removed by remove")
    func storeFindRemove() async throws {
        let home = TemporaryDirectory()
        guard
            let lines = try await Self.session(
                """
                "$H" keyring available
                "$H" keyring store example.test 443 api alice 'p4ss-alice'
                "$H" keyring store example.test 443 api bob 'p4ss-bob'
                "$H" keyring store example.test 443 api alice 'p4ss-alice-2'
                echo "--- secret-tool"
                secret-tool search --all host example.test user alice 2>&1
                echo "--- after"
                "$H" keyring lookup example.test 443 api alice
                "$H" keyring lookup example.test 443 other alice
                "$H" keyring list
                "$H" keyring remove example.test 443 api bob
                "$H" keyring remove example.test 443 api bob
                "$H" keyring list
                """, home: home)
        else { return }
        #expect(lines.first == "available true", "\(lines)")
        #expect(lines.filter { $0 == "stored" }.count == 3, "\(lines)")
        let found = lines.drop { $0 != "--- secret-tool" }.prefix { $0 != "--- after" }
        for expected in [
            "label = URLLoading: alice at https://example.test:443 (api)", "secret = p4ss-alice-2", "attribute.host = example.test",
            "attribute.port = 443", "attribute.protocol = https", "attribute.realm = api", "attribute.method = basic", "attribute.user = alice",
        ] {
            #expect(found.contains(expected), "\(expected) in \(Array(found))")
        }
        #expect(found.filter { $0.hasPrefix("label = ") }.count == 1, "storing again replaces the item: \(Array(found))")
        let after = Array(lines.drop { $0 != "--- after" }.dropFirst())
        #expect(
            after == [
                "password p4ss-alice-2", "none", "item example.test 443 api alice true", "item example.test 443 api bob true", "removed true",
                "removed false", "item example.test 443 api alice true",
            ], "\(after)")
    }

    @Test("A locked keyring prompts nothing: a lookup finds no password and returns; no session bus means no keyring, without a call")
    func lockedAndAbsent() async throws {
        let home = TemporaryDirectory()
        guard let first = try await Self.session(#""$H" keyring store example.test 443 api alice 'p4ss-alice'"#, home: home) else { return }
        #expect(first == ["stored"], "\(first)")
        // A new session whose daemon was not given the password: the keyring on disk is locked.
        let locked = try await Self.session(#""$H" keyring lookup example.test 443 api alice"#, home: home, unlocked: false)
        #expect(locked == ["none"] || (locked?.first?.hasPrefix("error ") ?? false), "\(locked ?? [])")

        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        environment["XDG_RUNTIME_DIR"] = home.path("no-bus-here")
        let absent = try await ChildProcess.run(ChildProcess.helper, ["keyring", "available"], environment: environment)
        #expect(absent.standardOutput == "available false\n", "\(absent.standardOutput)\(absent.standardError)")
    }
}
