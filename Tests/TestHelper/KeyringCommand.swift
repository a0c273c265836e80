import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import URLLoading

// urlloading-test-helper keyring available
// urlloading-test-helper keyring store HOST PORT REALM USER PASSWORD
// urlloading-test-helper keyring lookup|remove HOST PORT REALM USER
// urlloading-test-helper keyring list
//     The Secret Service itself, in the scope "helper", run
//     inside the test's D-Bus session. One line per result: "available
//     true|false", "stored", "password <text>|none", "removed true|false",
//     "item <host> <port> <realm> <user> <password-known>" and "locked <count>"
//     (items whose owner a locked keyring hides), or "error <message>"
//     (exit 1). Calls separated by "," run one after another in the
//     process. URLLOADING_KEYRING_TIMEOUT bounds each call (seconds).
//
// urlloading-test-helper credentials DIR STEP...
//     A CredentialStore opened in DIR (the automatic choice), then the
//     steps in order, one line each:
//       backend                     "backend <memory|file|keyring>"
//       set HOST PORT REALM USER PASSWORD permanent|session|default
//                                   "set" (default: permanent, as the default)
//       get HOST PORT REALM         "default <user> <password>|none <elapsed-ms>"
//       users HOST PORT REALM       "users <user,...>"
//       remove HOST PORT REALM USER "removed"
//       fetch URL                   a GET through a session on the store:
//                                   "status <code> <body>"
//     Changes the store posted are counted in a last line "changes <n>".
//     The store's log goes to standard error.
func runKeyring(_ arguments: [String]) -> Never {
    let timeout = ProcessInfo.processInfo.environment["URLLOADING_KEYRING_TIMEOUT"].flatMap(TimeInterval.init) ?? 5
    let keyring = SecretServiceKeyring(scope: "helper", timeout: timeout)
    var failed = false
    for call in arguments.split(separator: ",", omittingEmptySubsequences: false).map(Array.init) {
        do {
            try runKeyringCall(call, keyring, timeout: timeout)
        } catch {
            print("error \(error)")
            failed = true
        }
    }
    exit(failed ? 1 : 0)
}

private func runKeyringCall(_ arguments: [String], _ keyring: SecretServiceKeyring, timeout: TimeInterval) throws {
    switch arguments.first {
    case "available":
        print("available \(SecretServiceKeyring.available(timeout: timeout))")
    case "store" where arguments.count == 6:
        try keyring.store(user: arguments[4], password: arguments[5], for: helperSpace(arguments[1...3]))
        print("stored")
    case "lookup" where arguments.count == 5:
        print(try keyring.password(user: arguments[4], for: helperSpace(arguments[1...3])).map { "password \($0)" } ?? "none")
    case "remove" where arguments.count == 5:
        print("removed \(try keyring.remove(user: arguments[4], for: helperSpace(arguments[1...3])))")
    case "list":
        let found = try keyring.items()
        for item in found.items.sorted(by: { ($0.space.host, $0.user) < ($1.space.host, $1.user) }) {
            print("item \(item.space.host) \(item.space.port) \(item.space.realm ?? "-") \(item.user) \(item.password != nil)")
        }
        if found.locked > 0 { print("locked \(found.locked)") }
    default:
        fail("keyring available|store|lookup|remove|list ... [, another call ...]")
    }
}

private func helperSpace(_ values: ArraySlice<String>) -> ProtectionSpace {
    let parts = Array(values)
    guard parts.count >= 3, let port = Int(parts[1]) else { fail("HOST PORT REALM") }
    return ProtectionSpace(host: parts[0], port: port, protocol: parts[0].hasPrefix("127.") ? "http" : "https", realm: parts[2], authenticationMethod: .httpBasic)
}

private final class ChangeCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

func runCredentials(_ arguments: [String]) async -> Never {
    guard let directory = arguments.first else { fail("credentials DIR STEP...") }
    let store: CredentialStore
    do {
        store = try CredentialStore(directory: URL(fileURLWithPath: directory, isDirectory: true))
    } catch {
        print("error \(error)")
        exit(1)
    }
    let changes = ChangeCounter()
    let observer = NotificationCenter.default.addObserver(forName: .credentialStoreChanged, object: store, queue: nil) { _ in changes.add() }
    var steps = arguments.dropFirst()
    func take(_ count: Int) -> [String] {
        guard steps.count >= count else { fail("a step lacks its arguments") }
        defer { steps = steps.dropFirst(count) }
        return Array(steps.prefix(count))
    }
    while let step = steps.popFirst() {
        switch step {
        case "backend":
            print("backend \(store.backend.rawValue)")
        case "reason":
            print("reason \(store.backendReason)")
        case "set":
            let values = take(6)
            let space = helperSpace(values[0...2])
            let persistence: Credential.Persistence = values[5] == "session" ? .forSession : .permanent
            store.set(Credential(user: values[3], password: values[4], persistence: persistence), for: space, isDefault: values[5] == "default")
            print("set")
        case "get":
            let started = Date()
            let found = store.defaultCredential(for: helperSpace(take(3)[...]))
            let elapsed = Int(Date().timeIntervalSince(started) * 1000)
            print("\(found.map { "default \($0.user ?? "") \($0.password ?? "")" } ?? "none") \(elapsed)")
        case "users":
            print("users \((store.credentials(for: helperSpace(take(3)[...])) ?? [:]).keys.sorted().joined(separator: ","))")
        case "remove":
            let values = take(4)
            store.remove(Credential(user: values[3], password: "", persistence: .permanent), for: helperSpace(values[0...2]))
            print("removed")
        case "fetch":
            guard let url = URL(string: take(1)[0]) else { fail("fetch URL") }
            let configuration = SessionConfiguration.ephemeral
            configuration.urlCredentialStorage = store
            let session = Session(configuration: configuration)
            do {
                let (data, response) = try await session.data(from: url)
                print("status \((response as? HTTPURLResponse)?.statusCode ?? 0) \(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))")
            } catch {
                print("error \(error)")
            }
            session.finishTasksAndInvalidate()
        default:
            fail("unknown step \(step)")
        }
    }
    NotificationCenter.default.removeObserver(observer)
    print("changes \(changes.value)")
    exit(0)
}
