import Foundation
@testable import URLLoading

// urlloading-test-helper keyring available
// urlloading-test-helper keyring store HOST PORT REALM USER PASSWORD
// urlloading-test-helper keyring lookup|remove HOST PORT REALM USER
// urlloading-test-helper keyring list
//     The Secret Service backend of the credential store (issue 37), run
//     inside the test's D-Bus session. One line per result: "available
//     true|false", "stored", "password <text>|none", "removed true|false",
//     "item <host> <port> <realm> <user> <password-known>", or "error <message>"
//     (exit 1). URLLOADING_KEYRING_TIMEOUT bounds each call (seconds).
func runKeyring(_ arguments: [String]) -> Never {
    let timeout = ProcessInfo.processInfo.environment["URLLOADING_KEYRING_TIMEOUT"].flatMap(TimeInterval.init) ?? 5
    let keyring = SecretServiceKeyring(timeout: timeout)
    func space(_ values: ArraySlice<String>) -> ProtectionSpace {
        let parts = Array(values)
        guard parts.count >= 3, let port = Int(parts[1]) else { fail("HOST PORT REALM") }
        return ProtectionSpace(host: parts[0], port: port, protocol: "https", realm: parts[2], authenticationMethod: .httpBasic)
    }
    do {
        switch arguments.first {
        case "available":
            print("available \(SecretServiceKeyring.available(timeout: timeout))")
        case "store" where arguments.count == 6:
            try keyring.store(user: arguments[4], password: arguments[5], for: space(arguments[1...3]))
            print("stored")
        case "lookup" where arguments.count == 5:
            print(try keyring.password(user: arguments[4], for: space(arguments[1...3])).map { "password \($0)" } ?? "none")
        case "remove" where arguments.count == 5:
            print("removed \(try keyring.remove(user: arguments[4], for: space(arguments[1...3])))")
        case "list":
            for item in try keyring.items().sorted(by: { ($0.space.host, $0.user) < ($1.space.host, $1.user) }) {
                print("item \(item.space.host) \(item.space.port) \(item.space.realm ?? "-") \(item.user) \(item.password != nil)")
            }
        default:
            fail("keyring available|store|lookup|remove|list ...")
        }
    } catch {
        print("error \(error)")
        exit(1)
    }
    exit(0)
}
