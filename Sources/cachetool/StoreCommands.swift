import ArgumentParser
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@_spi(Tools) import URLLoading
import URLLoadingPostgres

/// Opens a persistent store that must already exist (a tool never creates
/// one by looking), mapping "absent" to exit code 3.
func existingStore<Store>(_ directory: URL, _ fileName: String, _ open: (URL) throws -> Store) throws -> Store {
    let path = directory.appendingPathComponent(fileName).path
    guard FileManager.default.fileExists(atPath: path) else {
        throw StoreError(kind: .notFound, message: "no store here; check --data-dir or the application identifier", path: path)
    }
    return try open(directory)
}

extension CacheTool {
    struct Fetch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "One request through a default session with the application's stores: a caching curl.",
            discussion: "Prints the status and how the cache served it (RFC 9211 Cache-Status); the body goes to -o FILE (or - for standard output).")

        @OptionGroup var store: StoreOptions
        @Argument(help: "The URL.") var url: String
        @Option(name: .customShort("H"), help: "A request header, as \"Name: value\".") var header: [String] = []
        @Option(help: "use-protocol (default), reload, return-cache-else-load, return-cache-dont-load, reload-revalidating.")
        var cachePolicy = "use-protocol"
        @Option(name: .customShort("o"), help: "Write the body here (- for standard output).") var output: String?

        struct Report: Encodable {
            var url: String
            var status: Int
            var cacheStatus: String?
            var bytes: Int
        }

        func run() async throws {
            let target = try parseURL(url)
            let policies: [String: URLRequest.CachePolicy] = [
                "use-protocol": .useProtocolCachePolicy, "reload": .reloadIgnoringLocalCacheData,
                "return-cache-else-load": .returnCacheDataElseLoad, "return-cache-dont-load": .returnCacheDataDontLoad,
                "reload-revalidating": .reloadRevalidatingCacheData,
            ]
            guard let policy = policies[cachePolicy] else {
                throw ValidationError("--cache-policy takes \(policies.keys.sorted().joined(separator: ", "))")
            }
            var request = URLRequest(url: target)
            request.cachePolicy = policy
            for field in try parseHeaders(header) { request.addValue(field.value, forHTTPHeaderField: field.name) }
            try await reportingStoreErrorsAsync {
                let configuration = SessionConfiguration.default
                configuration.applicationIdentifier = store.applicationIdentifier ?? "cachetool"
                if let postgresURL = store.postgresURL {
                    // The fleet's stores, as a worker has them.
                    let database = try PostgresDatabase(url: postgresURL, maximumConnections: 2)
                    // No capacity of its own: a fetch never evicts the fleet's entries.
                    configuration.urlCache = try ResponseCache(memoryCapacity: 0, diskCapacity: Int.max / 2, database: database)
                    configuration.httpCookieStorage = try CookieStore(database: database)
                    configuration.urlCredentialStorage = try CredentialStore(database: database)
                } else if store.cacheDir != nil {
                    configuration.urlCache = try ResponseCache.open(memoryCapacity: 512 * 1024, diskCapacity: 10 * 1024 * 1024, directory: store.cacheDirectory)
                }
                if store.dataDir != nil, store.postgresURL == nil {
                    configuration.httpCookieStorage = try CookieStore(directory: store.dataDirectory, keepSessionCookies: true)
                    configuration.urlCredentialStorage = try CredentialStore(directory: store.dataDirectory)
                }
                let session = Session(configuration: configuration)
                defer { session.finishTasksAndInvalidate() }
                // A store the session had to replace by one in memory is an error here.
                if let error = session.startupErrors.first { throw error }
                let data: Data
                let response: URLResponse
                do {
                    (data, response) = try await session.data(for: request)
                } catch {
                    FileHandle.standardError.write(Data("cachetool: \(error)\n".utf8))
                    throw ExitCode(ExitStatus.failure)
                }
                await session.flush()
                let http = response as? HTTPURLResponse
                let report = Report(
                    url: CachedURL.displayed(url), status: http?.statusCode ?? 0,
                    cacheStatus: http?.value(forHTTPHeaderField: "Cache-Status"), bytes: data.count)
                if let output {
                    if output == "-" {
                        FileHandle.standardOutput.write(data)
                    } else {
                        do { try data.write(to: URL(fileURLWithPath: output)) } catch {
                            FileHandle.standardError.write(Data("cachetool: cannot write \(output): \(error.localizedDescription)\n".utf8))
                            throw ExitCode(ExitStatus.failure)
                        }
                    }
                }
                if output == "-" { return }
                if store.json {
                    try printJSON(report)
                } else {
                    print("\(report.status) \(HTTPURLResponse.localizedString(forStatusCode: report.status)), \(counted(report.bytes, "byte", "bytes"))")
                    print("Cache-Status: \(report.cacheStatus ?? "(none)")")
                }
            }
        }
    }

    struct Cookies: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The cookie store: list, remove, clear, import and export (Netscape cookies.txt). Values are never printed.",
            subcommands: [ListCookies.self, RemoveCookies.self, ClearCookies.self, ImportCookies.self, ExportCookies.self])
    }

    struct CookieRow: Encodable {
        var name: String
        var domain: String
        var hostOnly: Bool
        var path: String
        var expires: String?
        var secure: Bool
        var httpOnly: Bool
        var sameSite: String
    }

    static func openCookies(_ store: StoreOptions) throws -> CookieStore {
        // A tool keeps session cookies: dropping them is the application's restart, not ours.
        try store.existingCookies()
    }

    struct ListCookies: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Every cookie: name, domain, path, expiry and flags, never the value.")
        @OptionGroup var store: StoreOptions
        @Option(help: "Only cookies whose domain is or ends with this.") var domain: String?

        func run() throws {
            try reportingStoreErrors {
                let cookies = try openCookies(store).allCookies
                    .filter { cookie in domain.map { cookie.canonicalDomain == $0 || cookie.canonicalDomain.hasSuffix("." + $0) } ?? true }
                    .sorted { ($0.canonicalDomain, $0.path, $0.name) < ($1.canonicalDomain, $1.path, $1.name) }
                let rows = cookies.map {
                    CookieRow(
                        name: $0.name, domain: $0.canonicalDomain, hostOnly: $0.isHostOnly, path: $0.path,
                        expires: $0.expiresDate.map { formatDate($0.timeIntervalSince1970) }, secure: $0.isSecure,
                        httpOnly: $0.isHTTPOnly, sameSite: $0.sameSite.rawValue)
                }
                if store.json { try printJSON(rows); return }
                for row in rows {
                    let flags = [row.secure ? "Secure" : nil, row.httpOnly ? "HttpOnly" : nil, row.sameSite == "unspecified" ? nil : "SameSite=\(row.sameSite)"]
                        .compactMap { $0 }.joined(separator: " ")
                    print("\(row.hostOnly ? "" : ".")\(row.domain)\t\(row.path)\t\(row.name)\t\(row.expires ?? "session")\t\(flags)")
                }
            }
        }
    }

    struct RemoveCookies: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove cookies by name and/or domain.")
        @OptionGroup var store: StoreOptions
        @Option(help: "The cookie's name.") var name: String?
        @Option(help: "The cookie's domain (and its subdomains).") var domain: String?

        func validate() throws {
            if name == nil && domain == nil { throw ValidationError("give --name, --domain or both (clear removes everything)") }
        }

        func run() throws {
            try reportingStoreErrors {
                let cookies = try openCookies(store)
                let doomed = cookies.allCookies.filter { cookie in
                    (name.map { cookie.name == $0 } ?? true) && (domain.map { cookie.canonicalDomain == $0 || cookie.canonicalDomain.hasSuffix("." + $0) } ?? true)
                }
                doomed.forEach(cookies.deleteCookie)
                try cookies.flush()
                if store.json { try printJSON(["removed": doomed.count]) } else { print("removed \(counted(doomed.count, "cookie", "cookies"))") }
            }
        }
    }

    struct ClearCookies: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "clear", abstract: "Remove every cookie.")
        @OptionGroup var store: StoreOptions

        func run() throws {
            try reportingStoreErrors {
                let cookies = try openCookies(store)
                let count = cookies.allCookies.count
                cookies.removeAll()
                try cookies.flush()
                if store.json { try printJSON(["removed": count]) } else { print("removed \(counted(count, "cookie", "cookies"))") }
            }
        }
    }

    struct ImportCookies: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "import", abstract: "Add the cookies of a Netscape cookies.txt file (curl -c, wget --save-cookies).")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The cookies.txt file.") var file: String

        func run() throws {
            let text: String
            do { text = try String(contentsOfFile: file, encoding: .utf8) } catch {
                FileHandle.standardError.write(Data("cachetool: cannot read \(file): \(error.localizedDescription)\n".utf8))
                throw ExitCode(ExitStatus.failure)
            }
            try reportingStoreErrors {
                let cookies =
                    try store.postgresURL.map { try CookieStore(database: PostgresDatabase(url: $0, maximumConnections: 2)) }
                    ?? CookieStore(directory: store.dataDirectory, keepSessionCookies: true)
                let result = cookies.importNetscapeFormat(text)
                try cookies.flush()
                if store.json {
                    try printJSON(["imported": result.imported, "skippedLines": result.skippedLines])
                } else {
                    print("imported \(counted(result.imported, "cookie", "cookies"))\(result.skippedLines > 0 ? "; skipped \(counted(result.skippedLines, "malformed line", "malformed lines"))" : "")")
                }
            }
        }
    }

    struct ExportCookies: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "export", abstract: "Write every cookie to a Netscape cookies.txt file (mode 0600: it holds the values).")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The file to write.") var file: String

        func run() throws {
            try reportingStoreErrors {
                let cookies = try openCookies(store)
                let text = cookies.exportNetscapeFormat()
                do {
                    // 0600 from the first byte: the file holds the cookies' values.
                    try PrivateFile.replace(file, with: Data(text.utf8))
                } catch {
                    FileHandle.standardError.write(Data("cachetool: \(error.localizedDescription)\n".utf8))
                    throw ExitCode(ExitStatus.failure)
                }
                let count = cookies.allCookies.count
                if store.json { try printJSON(["exported": count]) } else { print("exported \(counted(count, "cookie", "cookies")) to \(file)") }
            }
        }
    }

    struct Credentials: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The credential store: list spaces and user names, remove, move between file and keyring. Passwords are never printed.",
            discussion: """
                Permanent credentials are kept in the desktop keyring (the Secret Service) or in the 0600 file \
                Credentials.sqlite in plain text; list shows each entry's backend.
                """,
            subcommands: [ListCredentials.self, RemoveCredentials.self, MigrateCredentials.self])
    }

    struct CredentialRow: Encodable {
        var protocolName: String
        var host: String
        var port: Int
        var realm: String?
        var method: String
        var proxy: Bool
        var users: [String]
        /// The space's default user, if it has one.
        var defaultUser: String?
        /// Where the passwords are kept ("file" or "keyring"), and whether in plain text.
        var backend: String
        var plainText: Bool
    }

    struct ListCredentials: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "Protection spaces, their user names and the backend keeping them (permanent credentials).")
        @OptionGroup var store: StoreOptions

        func run() throws {
            try reportingStoreErrors {
                let listing = try store.fleetCredentials().map(CredentialStore.listing(of:)) ?? CredentialStore.listing(directory: store.dataDirectory)
                let groups = Dictionary(grouping: listing.credentials) { SpaceKey(space: $0.space, backend: $0.backend.rawValue) }
                let rows = groups.map { key, entries in
                    CredentialRow(
                        protocolName: key.space.protocol, host: key.space.host, port: key.space.port, realm: key.space.realm,
                        method: key.space.authenticationMethod.rawValue, proxy: key.space.isProxy, users: entries.map(\.user).sorted(),
                        defaultUser: entries.first { $0.isDefault }?.user,
                        backend: key.backend, plainText: entries.first?.backend.keepsPlainText ?? false)
                }
                .sorted { ($0.host, $0.port, $0.realm ?? "", $0.backend) < ($1.host, $1.port, $1.realm ?? "", $1.backend) }
                if listing.lockedInKeyring > 0 {
                    FileHandle.standardError.write(
                        Data("cachetool: the keyring is locked; \(listing.lockedInKeyring) items in it are not listed (unlock it to see them)\n".utf8))
                }
                if store.json { try printJSON(rows); return }
                for row in rows {
                    print(
                        "\(row.proxy ? "proxy " : "")\(row.protocolName)://\(row.host):\(row.port) realm=\(row.realm.map { "\"\($0)\"" } ?? "-") \(row.method): \(row.users.joined(separator: ", ")) [\(row.plainText ? "\(row.backend), plain text" : row.backend)]"
                    )
                }
            }
        }

        struct SpaceKey: Hashable {
            var space: ProtectionSpace
            var backend: String
        }
    }

    struct RemoveCredentials: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove", abstract: "Remove the credentials of a host (optionally one user, one realm) from every backend.")
        @OptionGroup var store: StoreOptions
        @Option(help: "The host.") var host: String
        @Option(help: "Only this user.") var user: String?
        @Option(help: "Only this realm.") var realm: String?

        func run() throws {
            try reportingStoreErrors {
                let removed: Int
                if let fleet = try store.fleetCredentials() {
                    let doomed = fleet.allCredentials.filter { $0.key.host == host.lowercased() && (realm == nil || $0.key.realm == realm) }
                        .flatMap { space, users in users.filter { user == nil || $0.key == user }.map { (space, $0.value) } }
                    for (space, credential) in doomed { fleet.remove(credential, for: space) }
                    removed = doomed.count
                } else {
                    removed = try CredentialStore.remove(directory: store.dataDirectory, host: host, user: user, realm: realm)
                }
                if store.json { try printJSON(["removed": removed]) } else { print("removed \(counted(removed, "credential", "credentials"))") }
                if removed == 0 { throw ExitCode(ExitStatus.notFound) }
            }
        }
    }

    struct MigrateCredentials: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "migrate", abstract: "Move every permanent credential into the keyring or the file.",
            discussion: """
                Each credential is written to the target, read back and compared before any is removed from the \
                other backend; nothing moves when the keyring is locked or a write fails. Passwords are never printed.
                """)
        @OptionGroup var store: StoreOptions
        @Option(help: "keyring or file.") var to: String

        func run() throws {
            guard let target = CredentialStore.Backend(rawValue: to), target == .file || target == .keyring else {
                throw ValidationError("--to takes keyring or file")
            }
            try reportingStoreErrors {
                let moved = try CredentialStore.migrate(directory: store.dataDirectory, to: target)
                let from = target == .keyring ? "file" : "keyring"
                if store.json {
                    try printJSON(Migrated(migrated: moved, from: from, to: target.rawValue))
                } else {
                    print("migrated \(counted(moved, "credential", "credentials")) from the \(from) to the \(target.rawValue)")
                }
            }
        }

        struct Migrated: Encodable {
            var migrated: Int
            var from: String
            var to: String
        }
    }
}
