import Foundation
import Postgres
import Testing
import TestSupport
@testable import URLLoading
@testable import URLLoadingPostgres

/// Cookies shared by a fleet: two stores on one PostgreSQL
/// database, as two workers of a crawl.
@Suite struct FleetCookieTests {
    static let page = URL(string: "https://www.example.com/docs/page")!

    @Test("A cookie one worker sets reaches the other's requests; a removal too; both setting one cookie at once leave one row and no error")
    func sharedJar() async throws {
        let database = try TestPostgres.database()
        defer { database.drop() }
        let first = try CookieStore(database: PostgresDatabase(url: database.url))
        let second = try CookieStore(database: PostgresDatabase(url: database.url))
        first.setCookies(["session=abc; Secure; HttpOnly"], for: Self.page)
        #expect(await eventually { second.cookieHeader(for: Self.page) == "session=abc" }, "the other worker never saw the cookie")
        second.setCookies(["session=def; Secure; HttpOnly"], for: Self.page)
        #expect(await eventually { first.cookieHeader(for: Self.page) == "session=def" })

        // Both workers set the same cookie 200 times at once, in many threads.
        await withTaskGroup(of: Void.self) { group in
            for worker in [first, second] {
                for round in 0..<4 {
                    group.addTask {
                        for index in 0..<50 { worker.setCookies(["race=\(round)-\(index); Max-Age=600"], for: Self.page) }
                    }
                }
            }
        }
        let rows = try PostgresDatabase(url: database.url).withConnection { (connection) throws(PostgresError) in
            try connection.query("SELECT count(*) FROM urlloading_cookies WHERE name = 'race'") { $0.int(0) ?? -1 }
        }
        #expect(rows == [1])
        // Whichever won, both workers agree on it once the notices are in.
        let stored = try CookieStore(database: PostgresDatabase(url: database.url)).allCookies.first { $0.name == "race" }?.value
        #expect(await eventually { first.allCookies.first { $0.name == "race" }?.value == stored && second.allCookies.first { $0.name == "race" }?.value == stored })

        if let cookie = first.allCookies.first(where: { $0.name == "session" }) { first.deleteCookie(cookie) }
        #expect(await eventually { second.cookieHeader(for: Self.page).map { !$0.contains("session=") } ?? true })
    }
}
