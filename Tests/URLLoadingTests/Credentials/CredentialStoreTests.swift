import Foundation
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// The credential stores: persistence none / forSession /
/// permanent, defaults, the file's mode and its refusal when others can read
/// it, `.netrc` import, and no secret in any description.
@Suite struct CredentialStoreTests {
    static let space = ProtectionSpace(host: "API.example.com", port: 443, protocol: "https", realm: "api", authenticationMethod: .httpBasic)

    @Test("Permanent credentials survive reopening; forSession ones stay in memory; none are never stored")
    func persistence() throws {
        let parent = TemporaryDirectory()
        // A directory the store creates gets mode 0700.
        let directory = (url: parent.url.appendingPathComponent("app"), path: { (name: String) in parent.path("app/" + name) })
        do {
            let store = try CredentialStore(directory: directory.url)
            store.set(Credential(user: "ann", password: "p1", persistence: .permanent), for: Self.space)
            store.set(Credential(user: "bob", password: "p2", persistence: .forSession), for: Self.space)
            store.set(Credential(user: "eve", password: "p3", persistence: .none), for: Self.space)
            #expect(Set(store.credentials(for: Self.space)?.keys ?? [:].keys) == ["ann", "bob"])
            #expect(store.defaultCredential(for: Self.space)?.user == "ann")
            store.setDefaultCredential(Credential(user: "bob", password: "p2", persistence: .forSession), for: Self.space)
            #expect(store.defaultCredential(for: Self.space)?.user == "bob")
        }
        let mode = try FileManager.default.attributesOfItem(atPath: directory.path("Credentials.sqlite"))[.posixPermissions] as? Int
        let directoryMode = try FileManager.default.attributesOfItem(atPath: directory.url.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(directoryMode == 0o700)
        let reopened = try CredentialStore(directory: directory.url)
        #expect(reopened.credentials(for: Self.space)?.keys.sorted() == ["ann"])
        #expect(reopened.defaultCredential(for: Self.space)?.password == "p1")
        #expect(reopened.allCredentials.keys.first?.host == "api.example.com")
        if let ann = reopened.defaultCredential(for: Self.space) { reopened.remove(ann, for: Self.space) }
        #expect(try CredentialStore(directory: directory.url).allCredentials.isEmpty)
    }

    @Test("A credential file that others can read is refused with a clear error")
    func refusesReadableFile() throws {
        let directory = TemporaryDirectory()
        _ = try CredentialStore(directory: directory.url)
        chmod(directory.path("Credentials.sqlite"), 0o644)
        #expect {
            _ = try CredentialStore(directory: directory.url)
        } throws: { error in
            (error as? StoreError)?.kind == .insecurePermissions && "\(error)".contains("Credentials.sqlite")
        }
    }

    @Test("Cookie and cache databases that others can read are refused with the same error")
    func refusesReadableCookieAndCacheFiles() throws {
        let directory = TemporaryDirectory()
        _ = try CookieStore(directory: directory.url)
        _ = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: directory.url)
        for name in ["Cookies.sqlite", "Cache.sqlite"] {
            chmod(directory.path(name), 0o644)
        }
        #expect {
            _ = try CookieStore(directory: directory.url)
        } throws: { error in
            (error as? StoreError)?.kind == .insecurePermissions && "\(error)".contains("Cookies.sqlite")
        }
        #expect {
            _ = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: directory.url)
        } throws: { error in
            (error as? StoreError)?.kind == .insecurePermissions && "\(error)".contains("Cache.sqlite")
        }
    }

    @Test("~/.netrc entries become permanent credentials for their hosts; default and macdef entries are skipped")
    func netrc() throws {
        let directory = TemporaryDirectory()
        let file = directory.url.appendingPathComponent("netrc")
        try """
        # comment
        machine Example.org login ann password s3cret
        macdef init
        cd /pub

        machine other.test
            login bob
            password "x"
        default login anonymous password guest
        """.write(to: file, atomically: true, encoding: .utf8)
        let store = CredentialStore()
        #expect(try store.importNetrc(from: file) == 2)
        let space = try #require(ProtectionSpace(url: URL(string: "https://example.org/x")!))
        #expect(store.defaultCredential(for: space)?.password == "s3cret")
        #expect(store.defaultCredential(for: ProtectionSpace(host: "other.test", port: 80, protocol: "http"))?.user == "bob")
        #expect(store.allCredentials.count == 4)
    }

    @Test("Secrets: descriptions, dumps and errors never show passwords")
    func secretsHidden() throws {
        let credential = Credential(user: "ann", password: "hunter2-secret", persistence: .permanent)
        let store = CredentialStore()
        store.set(credential, for: Self.space)
        var dumped = ""
        dump(credential, to: &dumped)
        let text = "\(credential) \(String(reflecting: credential)) \(store) \(store.allCredentials) \(dumped)"
        #expect(!text.contains("hunter2"))
        #expect(text.contains("ann"))
    }

    @Test("Apple's URLCredentialStorage shapes: optional credential lists, task forms, handler forms")
    func applesShapes() async throws {
        let store = CredentialStore()
        #expect(store.credentials(for: Self.space) == nil)
        let session = Session(configuration: .ephemeral)
        let task = session.dataTask(with: try #require(URL(string: "https://example.org/")))
        store.set(Credential(user: "ann", password: "p1", persistence: .forSession), for: Self.space, task: task)
        store.setDefaultCredential(Credential(user: "bob", password: "p2", persistence: .forSession), for: Self.space, task: task)
        #expect(store.credentials(for: Self.space)?.keys.sorted() == ["ann", "bob"])
        let latch = CompletionLatch()
        let seen = Lock<(String?, Int)>((nil, 0))
        store.getDefaultCredential(for: Self.space, task: task) { credential in
            seen.withLock { $0.0 = credential?.user }
            store.getCredentials(for: Self.space, task: task) { credentials in
                seen.withLock { $0.1 = credentials?.count ?? 0 }
                latch.open()
            }
        }
        await latch.wait()
        #expect(seen.withLock { $0.0 } == "bob" && seen.withLock { $0.1 } == 2)
        store.remove(Credential(user: "bob", password: "p2", persistence: .forSession), for: Self.space, task: task)
        #expect(store.credentials(for: Self.space)?.keys.sorted() == ["ann"])
        task.cancel()
        session.invalidateAndCancel()
    }
}
