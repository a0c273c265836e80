import Foundation
import Postgres
import Testing
import TestSupport
@testable import URLLoading
@testable import URLLoadingPostgres

/// Credentials shared by a fleet, and the rules every credential
/// store keeps, on the SQLite file and on PostgreSQL (one suite, two backends).
@Suite struct FleetCredentialTests {
    static let space = ProtectionSpace(host: "api.example.com", port: 443, protocol: "https", realm: "api", authenticationMethod: .httpBasic)

    /// A store over the backend's place, opened again on each call.
    final class Place {
        let directory: TemporaryDirectory?
        let postgres: TestPostgres?
        init(_ backend: CacheBackend) throws {
            directory = backend == .sqlite ? TemporaryDirectory() : nil
            postgres = backend == .postgres ? try TestPostgres.database() : nil
        }
        deinit { postgres?.drop() }
        func open() throws -> CredentialStore {
            if let directory { return try CredentialStore(directory: directory.url, backend: .file) }
            guard let postgres else { throw TestPostgresError(message: "no place") }
            return try CredentialStore(database: PostgresDatabase(url: postgres.url))
        }
    }

    @Test("On both backends: permanent credentials and the default survive reopening, for-session ones do not, removal removes", arguments: CacheBackend.allCases)
    func rules(_ backend: CacheBackend) throws {
        let place = try Place(backend)
        do {
            let store = try place.open()
            #expect(store.backend == (backend == .sqlite ? .file : .database) && store.backend.keepsPlainText)
            store.set(Credential(user: "ann", password: "ann-secret-1", persistence: .permanent), for: Self.space)
            store.setDefaultCredential(Credential(user: "bob", password: "bob-secret-2", persistence: .permanent), for: Self.space)
            store.set(Credential(user: "cy", password: "p3", persistence: .forSession), for: Self.space)
            store.set(Credential(user: "eve", password: "p4", persistence: .none), for: Self.space)
            #expect(!"\(store)".contains("ann-secret-1") && !"\(store)".contains("bob-secret-2"))
        }
        let reopened = try place.open()
        #expect(reopened.credentials(for: Self.space)?.keys.sorted() == ["ann", "bob"])
        #expect(reopened.defaultCredential(for: Self.space)?.user == "bob")
        reopened.setDefaultCredential(Credential(user: "ann", password: "ann-secret-1", persistence: .permanent), for: Self.space)
        reopened.remove(Credential(user: "bob", password: "", persistence: .permanent), for: Self.space)
        let third = try place.open()
        #expect(third.credentials(for: Self.space)?.keys.sorted() == ["ann"])
        #expect(third.defaultCredential(for: Self.space)?.password == "ann-secret-1")
    }

    @Test("Two workers: a credential one stores reaches the other (by notice, and on a miss); a removal too; another database role cannot read the table")
    func shared() async throws {
        let database = try TestPostgres.database()
        defer { database.drop() }
        let first = try CredentialStore(database: PostgresDatabase(url: database.url))
        let second = try CredentialStore(database: PostgresDatabase(url: database.url))
        first.set(Credential(user: "ann", password: "ann-secret-1", persistence: .permanent), for: Self.space)
        #expect(await eventually { second.credentials(for: Self.space)?["ann"]?.password == "ann-secret-1" }, "the notice never came")
        first.remove(Credential(user: "ann", password: "", persistence: .permanent), for: Self.space)
        #expect(await eventually { second.credentials(for: Self.space) == nil })

        // Another role of the same server: refused by the table's privileges.
        let server = try #require(TestPostgres.server)
        let admin = try PostgresConnection("\(server) dbname=\(database.name)")
        try admin.run("CREATE ROLE \(database.name)_intruder LOGIN")
        defer { _ = try? admin.run("DROP OWNED BY \(database.name)_intruder"); _ = try? admin.run("DROP ROLE \(database.name)_intruder") }
        let intruder = try PostgresConnection("\(server) dbname=\(database.name) user=\(database.name)_intruder")
        #expect {
            try intruder.query("SELECT password FROM urlloading_credentials") { $0.text(0) }
        } throws: { error in
            (error as? PostgresError)?.sqlState == "42501"
        }
    }

    @Test("A worker that opened before another stored a credential finds it on a challenge's miss")
    func missAsksTheDatabase() throws {
        let database = try TestPostgres.database()
        defer { database.drop() }
        let late = try CredentialStore(database: PostgresDatabase(url: database.url))
        // Written behind the store's back (no notice): only the miss path can find it.
        let connection = try PostgresConnection(database.url)
        try connection.run(
            """
            INSERT INTO urlloading_credentials(host, port, protocol, realm, method, is_proxy, username, password, is_default, created)
            VALUES ('api.example.com', 443, 'https', 'api', 'basic', false, 'ann', 'ann-secret-1', true, 0)
            """)
        #expect(late.defaultCredential(for: Self.space)?.password == "ann-secret-1")
    }
}
