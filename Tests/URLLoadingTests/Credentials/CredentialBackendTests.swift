import Foundation
import Locking
import Logging
import Testing
import TestSupport
@testable import URLLoading

/// The store's backend seam on the file backend, and the rules
/// both backends share: the automatic choice and what forces one, defaults
/// kept across reopening, change notifications, a locked backend asked
/// again at most every few seconds. The keyring itself: `KeyringTests`.
@Suite struct CredentialBackendTests {
    static let space = ProtectionSpace(host: "api.example.com", port: 443, protocol: "https", realm: "api", authenticationMethod: .httpBasic)
    static let logger = Logger(label: "test")

    @Test("The choice: forced by the argument or URLLOADING_CREDENTIALS; without a bus the file; an unknown value is a clear error")
    func choice() throws {
        let directory = TemporaryDirectory()
        let noBus = ["XDG_RUNTIME_DIR": directory.path("no-bus")]
        let automatic = try CredentialStore.openBackend(directory: directory.url, choice: .automatic, environment: noBus, logger: Self.logger)
        #expect(automatic.backend.backend == .file)
        #expect(automatic.reason == "no Secret Service answers on a session bus")
        let forced = try CredentialStore.openBackend(
            directory: directory.url, choice: .automatic, environment: noBus.merging(["URLLOADING_CREDENTIALS": "FILE"]) { $1 }, logger: Self.logger)
        #expect(forced.reason == "forced by URLLOADING_CREDENTIALS=file")
        // The argument wins over the environment.
        let argument = try CredentialStore.openBackend(
            directory: directory.url, choice: .file, environment: ["URLLOADING_CREDENTIALS": "keyring"], logger: Self.logger)
        #expect(argument.reason == "forced by backend: .file")
        #expect {
            _ = try CredentialStore.openBackend(
                directory: directory.url, choice: .automatic, environment: ["URLLOADING_CREDENTIALS": "vault"], logger: Self.logger)
        } throws: { error in
            (error as? StoreError)?.kind == .configuration && "\(error)".contains("takes file, keyring or automatic")
        }
        #expect {
            _ = try CredentialStore.openBackend(directory: directory.url, choice: .keyring, environment: noBus, logger: Self.logger)
        } throws: { error in
            (error as? StoreError)?.kind == .keyring && "\(error)".contains("no Secret Service answers")
        }
    }

    @Test("The default credential of a space survives reopening, and a new default demotes the old one on disk")
    func defaultsPersist() throws {
        let directory = TemporaryDirectory()
        do {
            let store = try CredentialStore(directory: directory.url, backend: .file)
            #expect(store.backend == .file && store.backendReason == "forced by backend: .file")
            store.set(Credential(user: "ann", password: "ann-secret-1", persistence: .permanent), for: Self.space)
            store.setDefaultCredential(Credential(user: "bob", password: "bob-secret-2", persistence: .permanent), for: Self.space)
        }
        let reopened = try CredentialStore(directory: directory.url, backend: .file)
        #expect(reopened.defaultCredential(for: Self.space)?.user == "bob")
        reopened.setDefaultCredential(Credential(user: "ann", password: "ann-secret-1", persistence: .permanent), for: Self.space)
        let rows = try FileCredentials(path: directory.path(CredentialStore.fileName), logger: Self.logger).load().credentials
        #expect(rows.filter(\.isDefault).map(\.user) == ["ann"], "one default on disk: \(rows.map { ($0.user, $0.isDefault) })")
        #expect(try CredentialStore(directory: directory.url, backend: .file).defaultCredential(for: Self.space)?.user == "ann")
        #expect("\(reopened)".contains("file (plain text), 1 spaces") && !"\(reopened)".contains("ann-secret-1"))
    }

    @Test("A change posts credentialStoreChanged (Apple's NSURLCredentialStorageChanged) once; storing what is there, or removing what is not, posts nothing")
    func changeNotifications() throws {
        let store = CredentialStore()
        let other = CredentialStore()
        let count = Lock(0)
        let observer = NotificationCenter.default.addObserver(forName: .credentialStoreChanged, object: store, queue: nil) { _ in
            count.withLock { $0 += 1 }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        #expect(Notification.Name.credentialStoreChanged.rawValue == "NSURLCredentialStorageChangedNotification")
        let ann = Credential(user: "ann", password: "p1", persistence: .forSession)
        store.set(ann, for: Self.space)
        store.set(ann, for: Self.space)
        #expect(count.withLock { $0 } == 1)
        store.set(Credential(user: "ann", password: "p2", persistence: .forSession), for: Self.space)
        store.set(Credential(user: "eve", password: "p3", persistence: .none), for: Self.space)
        other.set(ann, for: Self.space)
        #expect(count.withLock { $0 } == 2)
        store.remove(Credential(user: "zed", password: "", persistence: .forSession), for: Self.space)
        store.remove(ann, for: Self.space)
        #expect(count.withLock { $0 } == 3)
        store.removeAll()
        #expect(count.withLock { $0 } == 3, "an empty store cleared posts nothing")
    }

    @Test("A backend that held locked items is asked again for a missing space at most every 10 s; one that held none is never asked")
    func lockedRetries() {
        var table = CredentialTable()
        let start = Date(timeIntervalSince1970: 1_000_000)
        var asked: [Bool] = []
        asked.append(table.shouldAskLockedBackend(for: Self.space, now: start))
        table.lockedItems = 2
        asked.append(table.shouldAskLockedBackend(for: Self.space, now: start))
        asked.append(table.shouldAskLockedBackend(for: Self.space, now: start.addingTimeInterval(9)))
        var other = Self.space
        other.realm = "other"
        asked.append(table.shouldAskLockedBackend(for: other, now: start.addingTimeInterval(9)))
        asked.append(table.shouldAskLockedBackend(for: Self.space, now: start.addingTimeInterval(10)))
        #expect(asked == [false, true, false, true, true])
    }
}
