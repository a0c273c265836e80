import Foundation
import Testing
import TestSupport
@testable import URLLoading

/// The credential store's Secret Service backend against a real
/// Secret Service: Debian's gnome-keyring-daemon, started under
/// dbus-run-session with a test keyring unlocked from a known password; the
/// test helper makes the calls, each in a process of its own, and
/// `secret-tool` (another client) reads what they left.
@Suite(.serialized, .timeLimit(.minutes(Sanitizer.minutes(2))))
struct KeyringTests {
    static let tools = ["/usr/bin/dbus-run-session", "/usr/bin/gnome-keyring-daemon", "/usr/bin/secret-tool"]

    /// Shell lines that kill the gnome-keyring-daemons of this session's
    /// bus, found by its address in their environment: the one the script
    /// started has it as `DBUS_SESSION_BUS_ADDRESS`, one D-Bus started on
    /// demand as `DBUS_STARTER_ADDRESS`. Another test run's daemons live on.
    static let endDaemons = #"""
        for p in $(pgrep -u "$(id -u)" -f "gnome-keyring-daemon" 2>/dev/null); do
            tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null \
                | grep -qxF -e "DBUS_SESSION_BUS_ADDRESS=$DBUS_SESSION_BUS_ADDRESS" -e "DBUS_STARTER_ADDRESS=$DBUS_SESSION_BUS_ADDRESS" \
                && kill -KILL "$p" 2>/dev/null
        done
        true
        """#

    /// Runs `steps` (shell lines; `$H` is the helper, `$C` cachetool, `$D`
    /// a store's folder) in a new D-Bus session with an unlocked keyring in
    /// `home`; nil (said in one line) when the tools are not installed.
    /// Standard error (the store's log) is kept in `$1/stderr`.
    /// With `unlocked` false the daemon starts without the password: the
    /// keyring a first session made stays locked.
    /// With `service` (a shell line that starts one in the background),
    /// that program is the Secret Service instead of gnome-keyring-daemon.
    static func session(_ steps: String, home: TemporaryDirectory, unlocked: Bool = true, service: String? = nil) async throws -> [String]? {
        guard tools.allSatisfy(FileManager.default.isExecutableFile(atPath:)) else {
            print("keyring: dbus-run-session, gnome-keyring-daemon or secret-tool is not installed; the keyring tests did not run")
            return nil
        }
        let script = """
            set -u
            export HOME="$1" XDG_DATA_HOME="$1/data" XDG_RUNTIME_DIR="$1/run" XDG_CONFIG_HOME="$1/config"
            mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
            H="$2" C="$3" D="$1/store"
            exec 2>>"$1/stderr"
            \(service ?? ((unlocked ? "printf 'test-keyring-password' | gnome-keyring-daemon --unlock" : "gnome-keyring-daemon </dev/null") + " --components=secrets --daemonize >/dev/null 2>&1"))
            # --daemonize returns before the daemon owns its bus name; a call before that would
            # have D-Bus start a second daemon, without the test keyring. Wait (bounded) for the name.
            i=0
            until dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \\
                org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null | grep -q "boolean true"; do
                i=$((i + 1)); [ "$i" -ge 400 ] && break; sleep 0.05
            done
            \(steps)
            # The daemon belongs to this session; it ends with it, and now.
            \(service == nil ? Self.endDaemons : "kill %1 2>/dev/null || true")
            """
        let path = home.path("steps.sh")
        try Data(script.utf8).write(to: URL(fileURLWithPath: path))
        var environment = ProcessInfo.processInfo.environment
        environment["URLLOADING_KEYRING_TIMEOUT"] = "\(3 * Sanitizer.timeScale)"
        environment.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        environment.removeValue(forKey: "URLLOADING_CREDENTIALS")
        // The test process's blocked signals would reach the bus daemon, which then
        // outlives dbus-run-session's SIGTERM: the mask is cleared before the exec.
        let unblocked = "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, set()); os.execv(sys.argv[1], sys.argv[1:])"
        let result = try await ChildProcess.run(
            URL(fileURLWithPath: "/usr/bin/python3"),
            [
                "-c", unblocked, "/usr/bin/dbus-run-session", "--", "/bin/sh", path, home.path("home"), ChildProcess.helper.path,
                ChildProcess.productsDirectory.appendingPathComponent("cachetool").path,
            ],
            environment: environment)
        return result.standardOutput.split(separator: "\n").map(String.init)
    }

    @Test("A program built on the library links neither libsecret nor GLib: the keyring backend loads them when a store asks for it")
    func libsecretIsNotLinked() async throws {
        let ldd = try await ChildProcess.run(URL(fileURLWithPath: "/usr/bin/ldd"), [ChildProcess.helper.path])
        #expect(ldd.status == 0, "\(ldd.standardError)")
        let lines = ldd.standardOutput.split(separator: "\n")
        let linked = lines.filter { line in ["libsecret", "libglib", "libgio", "libgobject"].contains { line.contains($0) } }
        #expect(linked.isEmpty, "\(linked)")
        #expect(lines.contains { $0.contains("libcurl") }, "ldd listed the helper's libraries: \(ldd.standardOutput)")
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
            "attribute.store = helper", "attribute.default = 0",
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

    @Test(
        "A Secret Service that never ends its prompt, even dismissed: the call returns an error after its bound, and later calls of the process fail at once"
    )
    func promptThatNeverEnds() async throws {
        let home = TemporaryDirectory()
        try Data(Self.promptNeverEnds.utf8).write(to: URL(fileURLWithPath: home.path("service.py")))
        guard
            let lines = try await Self.session(
                #"timeout 60 "$H" keyring store example.test 443 api alice 'p4ss-alice' , lookup example.test 443 api alice"#, home: home,
                service: #"/usr/bin/python3 "$1/../service.py" "$1/../service.log" &"#)
        else { return }
        let log = (try? String(contentsOfFile: home.path("service.log"), encoding: .utf8)) ?? ""
        #expect(log.contains("Prompt") && log.contains("Dismiss"), "the store reached the prompt and cancelled it: \(log)")
        #expect(lines.count == 2, "both calls returned: \(lines)")
        #expect(lines.first?.contains("nor end its call when cancelled") == true, "\(lines)")
        #expect(lines.last?.contains("not asked again") == true, "\(lines)")
        #expect(!lines.joined().contains("p4ss"), "\(lines)")
    }

    /// A Secret Service (GLib's D-Bus bindings for Python) whose items
    /// are made only through a prompt that never completes: libsecret's
    /// store waits for the prompt's Completed signal, also after it
    /// dismissed the prompt. Each method call is logged by name.
    static let promptNeverEnds = #"""
        import sys
        from gi.repository import Gio, GLib
        log = open(sys.argv[1], "a", buffering=1)
        BASE = "/org/freedesktop/secrets"
        NODE = Gio.DBusNodeInfo.new_for_xml("""<node>
          <interface name="org.freedesktop.Secret.Service">
            <method name="OpenSession"><arg type="s" direction="in"/><arg type="v" direction="in"/>
              <arg type="v" direction="out"/><arg type="o" direction="out"/></method>
            <method name="SearchItems"><arg type="a{ss}" direction="in"/><arg type="ao" direction="out"/><arg type="ao" direction="out"/></method>
            <method name="ReadAlias"><arg type="s" direction="in"/><arg type="o" direction="out"/></method>
            <method name="CreateCollection"><arg type="a{sv}" direction="in"/><arg type="s" direction="in"/>
              <arg type="o" direction="out"/><arg type="o" direction="out"/></method>
          </interface>
          <interface name="org.freedesktop.Secret.Collection">
            <method name="CreateItem"><arg type="a{sv}" direction="in"/><arg type="(oayays)" direction="in"/><arg type="b" direction="in"/>
              <arg type="o" direction="out"/><arg type="o" direction="out"/></method>
          </interface>
          <interface name="org.freedesktop.Secret.Prompt">
            <method name="Prompt"><arg type="s" direction="in"/></method>
            <method name="Dismiss"/>
            <signal name="Completed"><arg type="b"/><arg type="v"/></signal>
          </interface>
        </node>""")
        ANSWERS = {
            "OpenSession": lambda: GLib.Variant("(vo)", (GLib.Variant("s", ""), BASE + "/session/s1")),
            "SearchItems": lambda: GLib.Variant("(aoao)", ([], [])),
            "ReadAlias": lambda: GLib.Variant("(o)", (BASE + "/collection/login",)),
            "CreateCollection": lambda: GLib.Variant("(oo)", (BASE + "/collection/login", "/")),
            "CreateItem": lambda: GLib.Variant("(oo)", ("/", BASE + "/prompt/p1")),
            "Prompt": lambda: None,
            "Dismiss": lambda: None,
        }
        def called(connection, sender, path, interface, method, parameters, invocation):
            log.write(method + "\n")
            answer = ANSWERS.get(method)
            if method == "OpenSession" and parameters[0] != "plain":
                invocation.return_dbus_error("org.freedesktop.DBus.Error.NotSupported", "plain only")
            elif answer is None:
                invocation.return_dbus_error("org.freedesktop.DBus.Error.UnknownMethod", method)
            else:
                invocation.return_value(answer())
        bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
        for path, interface in [(BASE, 0), (BASE + "/collection/login", 1), (BASE + "/aliases/default", 1), (BASE + "/prompt/p1", 2)]:
            bus.register_object(path, NODE.interfaces[interface], called, None, None)
        Gio.bus_own_name_on_connection(bus, "org.freedesktop.secrets", Gio.BusNameOwnerFlags.NONE, None, None)
        GLib.MainLoop().run()
        """#

    @Test(
        "The store chooses the keyring: permanent credentials become items with the documented attributes, a new process finds them with their default, for-session ones never reach the keyring, removal removes the item"
    )
    func storeInTheKeyring() async throws {
        let home = TemporaryDirectory()
        guard
            let lines = try await Self.session(
                """
                "$H" credentials "$D" backend set example.test 443 api alice p4ss-alice permanent set example.test 443 api bob p4ss-bob default \\
                    set example.test 443 api carol p4ss-carol session set example.test 443 api bob p4ss-bob default
                echo "--- secret-tool"
                secret-tool search --all store "$D" 2>&1
                echo "--- reopened"
                "$H" credentials "$D" backend get example.test 443 api users example.test 443 api remove example.test 443 api bob \\
                    get example.test 443 api
                echo "--- after removal"
                secret-tool search --all store "$D" 2>&1 | grep '^attribute.user'
                test -e "$D/Credentials.sqlite" && echo "file exists"
                echo "--- end"
                """, home: home)
        else { return }
        let first = Array(lines.prefix { $0 != "--- secret-tool" })
        // Storing bob again as he is changes nothing and posts nothing.
        #expect(first == ["backend keyring", "set", "set", "set", "set", "changes 3"], "\(first)")
        let found = Array(lines.drop { $0 != "--- secret-tool" }.prefix { $0 != "--- reopened" })
        for expected in [
            "label = URLLoading: alice at https://example.test:443 (api)", "label = URLLoading: bob at https://example.test:443 (api)",
            "secret = p4ss-alice", "secret = p4ss-bob", "attribute.host = example.test", "attribute.port = 443", "attribute.protocol = https",
            "attribute.realm = api", "attribute.method = basic", "attribute.user = alice", "attribute.user = bob",
            "attribute.store = \(home.path("home/store"))", "attribute.default = 1", "attribute.default = 0",
        ] {
            #expect(found.contains(expected), "\(expected) in \(found)")
        }
        #expect(found.filter { $0.hasPrefix("label = ") }.count == 2, "\(found)")
        #expect(!lines.contains { $0.contains("carol") }, "a for-session credential reached the keyring: \(lines)")
        let reopened = Array(lines.drop { $0 != "--- reopened" }.dropFirst().prefix { $0 != "--- after removal" })
        #expect(reopened.count == 6, "\(reopened)")
        #expect(reopened.first == "backend keyring")
        #expect(reopened.dropFirst().first?.hasPrefix("default bob p4ss-bob ") == true, "\(reopened)")
        #expect(reopened.dropFirst(2).first == "users alice,bob")
        // With the default removed the space has none (as Apple's store), though alice's item stays.
        #expect(reopened.dropFirst(4).first?.hasPrefix("none ") == true, "\(reopened)")
        #expect(reopened.last == "changes 1")
        let after = Array(lines.drop { $0 != "--- after removal" }.dropFirst())
        #expect(after == ["attribute.user = alice", "--- end"], "one item left, no file made: \(after)")
        let log = (try? String(contentsOfFile: home.path("home/stderr"), encoding: .utf8)) ?? ""
        #expect(!log.contains("p4ss"), "a password in the log: \(log)")
    }

    @Test("A locked keyring: a lookup finds no credential within 2 s and says why; the task gets the 401 as without a store, and the credential once unlocked")
    func lockedKeyringTask() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        origin.route("/private", Routes.basicAuth(realm: "api", user: "alice", password: "p4ss-alice", then: ScriptedResponse(body: "hello alice")))
        let url = "\(origin.baseURL)/private"
        let host = "127.0.0.1"
        let port = "\(origin.port)"
        let home = TemporaryDirectory()
        guard let stored = try await Self.session(#""$H" credentials "$D" set \#(host) \#(port) api alice p4ss-alice default"#, home: home) else { return }
        #expect(stored == ["set", "changes 1"], "\(stored)")
        let locked = try await Self.session(#""$H" credentials "$D" backend fetch \#(url) get \#(host) \#(port) api"#, home: home, unlocked: false)
        let lines = locked ?? []
        #expect(lines.count == 4, "\(lines)")
        #expect(lines.first == "backend keyring")
        #expect(lines.dropFirst().first?.hasPrefix("status 401 ") == true, "\(lines)")
        let words = lines.dropFirst(2).first?.split(separator: " ") ?? []
        #expect(words.first == "none", "\(lines)")
        let elapsed = words.last.flatMap { Int($0) } ?? .max
        #expect(elapsed < 2000 * Sanitizer.timeScale, "a lookup in a locked keyring took \(elapsed) ms")
        let log = (try? String(contentsOfFile: home.path("home/stderr"), encoding: .utf8)) ?? ""
        #expect(log.contains("locked keyring"), "\(log)")
        #expect(!log.contains("p4ss"), "\(log)")
        let unlocked = try await Self.session(#""$H" credentials "$D" fetch \#(url)"#, home: home)
        #expect(unlocked == ["status 200 hello alice", "changes 0"], "\(unlocked ?? [])")
    }

    @Test(
        "Forcing a backend: URLLOADING_CREDENTIALS=file keeps the file beside a keyring, the automatic choice then stays with the file that holds credentials; an unknown value and a keyring forced without one are clear errors"
    )
    func forcedBackends() async throws {
        let home = TemporaryDirectory()
        guard
            let lines = try await Self.session(
                """
                URLLOADING_CREDENTIALS=file "$H" credentials "$D" backend set example.test 443 api alice p4ss-alice permanent
                "$H" credentials "$D" backend users example.test 443 api
                URLLOADING_CREDENTIALS=keyring "$H" credentials "$D" backend users example.test 443 api
                URLLOADING_CREDENTIALS=Bogus "$H" credentials "$D" backend
                """, home: home)
        else { return }
        #expect(lines.count == 10, "\(lines)")
        #expect(
            Array(lines.prefix(9)) == [
                "backend file", "set", "changes 1", "backend file", "users alice", "changes 0", "backend keyring", "users ", "changes 0",
            ], "\(lines)")
        #expect(lines.last?.hasPrefix("error URLLOADING_CREDENTIALS is \"Bogus\"; it takes file, keyring or automatic") == true, "\(lines)")

        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        environment["XDG_RUNTIME_DIR"] = home.path("no-bus-here")
        environment["URLLOADING_CREDENTIALS"] = "keyring"
        let absent = try await ChildProcess.run(ChildProcess.helper, ["credentials", home.path("elsewhere"), "backend"], environment: environment)
        #expect(absent.standardOutput.hasPrefix("error URLLOADING_CREDENTIALS=keyring asks for the keyring, and no Secret Service answers"), "\(absent.standardOutput)")
    }

    @Test("Without libsecret (hidden from the loader) the automatic choice is the file and says why; the keyring forced is a clear error; with it the same bus gives the keyring")
    func withoutLibsecret() async throws {
        let home = TemporaryDirectory()
        guard
            let lines = try await Self.session(
                """
                export URLLOADING_LIBSECRET=/nonexistent/libsecret-1.so.0
                "$H" credentials "$D" backend reason
                URLLOADING_CREDENTIALS=keyring "$H" credentials "$D-forced" backend
                unset URLLOADING_LIBSECRET
                "$H" credentials "$D-found" backend
                """, home: home)
        else { return }
        // Each helper run that opened its store ends with its count of change notices.
        #expect(lines.count == 6, "\(lines)")
        let (chosen, reason, forced, found) = (lines.first, lines.dropFirst().first, lines.dropFirst(3).first, lines.dropFirst(4).first)
        #expect(chosen == "backend file", "\(lines)")
        #expect(reason?.hasPrefix("reason libsecret cannot be loaded (Debian's libsecret-1-0 installs it)") == true, "\(lines)")
        #expect(forced?.hasPrefix("error URLLOADING_CREDENTIALS=keyring asks for the keyring, and libsecret cannot be loaded") == true, "\(lines)")
        #expect(found == "backend keyring", "\(lines)")
    }

    @Test("cachetool credentials migrate moves every entry to the keyring and back, counted, with defaults; list shows each entry's backend; no secret printed")
    func migrate() async throws {
        let home = TemporaryDirectory()
        guard
            let lines = try await Self.session(
                """
                URLLOADING_CREDENTIALS=file "$H" credentials "$D" set a.test 443 api ann p4ss-ann permanent set a.test 443 api bob p4ss-bob default \\
                    set b.test 8443 web cy p4ss-cy permanent >/dev/null
                "$C" credentials list --data-dir "$D"
                echo "--- to keyring"
                "$C" credentials migrate --to keyring --data-dir "$D"; echo "exit $?"
                "$C" credentials list --data-dir "$D"
                "$H" credentials "$D" backend get a.test 443 api get b.test 8443 web
                echo "--- to file"
                "$C" credentials migrate --to file --data-dir "$D" --json; echo "exit $?"
                "$C" credentials list --data-dir "$D" --json | grep -c '"backend" : "file"'
                "$H" credentials "$D" backend get a.test 443 api users a.test 443 api
                secret-tool search --all store "$D" 2>&1 | grep -c '^label' || true
                """, home: home)
        else { return }
        #expect(!lines.contains { $0.contains("p4ss") && !$0.hasPrefix("default ") }, "a secret printed: \(lines)")
        let before = Array(lines.prefix { $0 != "--- to keyring" })
        #expect(
            before == [
                "https://a.test:443 realm=\"api\" basic: ann, bob [file, plain text]", "https://b.test:8443 realm=\"web\" basic: cy [file, plain text]",
            ], "\(before)")
        let toKeyring = Array(lines.drop { $0 != "--- to keyring" }.dropFirst().prefix { $0 != "--- to file" })
        #expect(
            Array(toKeyring.prefix(4)) == [
                "migrated 3 credentials from the file to the keyring", "exit 0",
                "https://a.test:443 realm=\"api\" basic: ann, bob [keyring]", "https://b.test:8443 realm=\"web\" basic: cy [keyring]",
            ], "\(toKeyring)")
        // The file is empty now: the automatic choice is the keyring, with bob still the default.
        #expect(toKeyring.dropFirst(4).first == "backend keyring", "\(toKeyring)")
        #expect(toKeyring.dropFirst(5).first?.hasPrefix("default bob p4ss-bob ") == true, "\(toKeyring)")
        #expect(toKeyring.dropFirst(6).first?.hasPrefix("default cy p4ss-cy ") == true, "\(toKeyring)")
        let toFile = Array(lines.drop { $0 != "--- to file" }.dropFirst())
        let json = toFile.prefix { !$0.hasPrefix("exit ") }.joined(separator: "\n")
        #expect(json.contains("\"migrated\" : 3") && json.contains("\"to\" : \"file\""), "\(json)")
        let rest = Array(toFile.drop { !$0.hasPrefix("exit ") })
        #expect(rest.first == "exit 0", "\(toFile)")
        #expect(rest.dropFirst().first == "2", "two spaces listed from the file: \(rest)")
        #expect(rest.dropFirst(2).first == "backend file", "\(rest)")
        #expect(rest.dropFirst(3).first?.hasPrefix("default bob p4ss-bob ") == true, "\(rest)")
        #expect(rest.dropFirst(4).first == "users ann,bob", "\(rest)")
        #expect(rest.last == "0", "no item left in the keyring: \(rest)")
    }
}
