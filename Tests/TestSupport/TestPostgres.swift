import Foundation
import Postgres

/// The PostgreSQL server of a test run: `tools/test` starts one
/// (`tools/postgres-server`) on a private socket and names it in
/// `URLLOADING_TEST_POSTGRES`; each test gets a database of its own,
/// dropped at its end.
public struct TestPostgres: Sendable {
    /// The server's connection string, from the environment.
    public static var server: String? {
        ProcessInfo.processInfo.environment["URLLOADING_TEST_POSTGRES"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Why a test needing PostgreSQL cannot run, in one line.
    public static let missing = "URLLOADING_TEST_POSTGRES is not set: run the tests with tools/test, which starts a PostgreSQL server"

    /// The database's connection string.
    public let url: String
    /// The database's name.
    public let name: String

    /// A new, empty database on the test server.
    public static func database() throws -> TestPostgres {
        guard let server else { throw TestPostgresError(message: missing) }
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let admin = try PostgresConnection(server)
        try admin.run("CREATE DATABASE \(name)")
        return TestPostgres(url: "\(server) dbname=\(name)", name: name)
    }

    /// Drops the database (ending the connections still open to it).
    public func drop() {
        guard let server = Self.server, let admin = try? PostgresConnection(server) else { return }
        _ = try? admin.run("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }
}

/// Why the test server could not be used.
public struct TestPostgresError: Error, CustomStringConvertible {
    public let message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}
