import ArgumentParser
import Foundation
@_spi(Tools) import URLLoading

/// `cachetool`: inspect and maintain the stores of URLLoading.
@main
struct CacheTool: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cachetool",
        abstract: "Inspect and maintain URLLoading's HTTP cache, cookie and credential stores.",
        discussion: """
            Stores are found under the XDG directories of an application identifier \
            ($XDG_CACHE_HOME/<app>/ for the cache, $XDG_DATA_HOME/<app>/ for cookies and \
            credentials), or given with --cache-dir and --data-dir. An application's \
            identifier is its executable's name unless it sets another; give it with --app. \
            Without --app the identifier is "\(StoreOptions.defaultApplicationIdentifier)": \
            the cache in \(StoreOptions.defaultLocations.cacheDirectory.path)/ and the cookies \
            and credentials in \(StoreOptions.defaultLocations.dataDirectory.path)/. Every reading \
            command takes --json (shapes in the DocC article "Inspecting the stores with cachetool"). Cookie values and passwords are never printed.

            Exit codes: 0 success; 1 failure; 2 usage error; 3 store not found; \
            4 store locked by another process; 5 store damaged or written by a newer version.
            """,
        subcommands: [
            Create.self, Info.self, List.self, Show.self, Stats.self, Explain.self, Remove.self, Prune.self, Clear.self,
            Vacuum.self, Verify.self, Fetch.self, Cookies.self, Credentials.self, Transfers.self,
        ]
    )

    /// Parses and runs, with usage errors exiting 2 (not ArgumentParser's 64)
    /// as the documented codes say. A value a subcommand refuses while it
    /// runs (a malformed duration) is answered with that subcommand's usage.
    static func main() async {
        var parsed: (any ParsableCommand.Type)?
        do {
            var command = try parseAsRoot()
            parsed = type(of: command)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            let code = exitCode(for: error)
            if code == .validationFailure {
                let text =
                    parsed.map { "Error: \(message(for: error))\nUsage: \(usageString(for: $0))\n  See 'cachetool \(name(of: $0)) --help' for more information." }
                    ?? fullMessage(for: error)
                FileHandle.standardError.write(Data((text + "\n").utf8))
                Foundation.exit(ExitStatus.usage)
            }
            exit(withError: error)
        }
    }

    /// A subcommand's words after `cachetool` (`cookies list`).
    private static func name(of command: any ParsableCommand.Type) -> String {
        usageString(for: command).split(separator: " ").dropFirst().prefix { !$0.hasPrefix("-") && !$0.hasPrefix("<") && !$0.hasPrefix("[") }
            .joined(separator: " ")
    }
}

/// Options every subcommand shares: which store, and how to print.
struct StoreOptions: ParsableArguments {
    @Option(name: .customLong("app"), help: "The application identifier whose stores to use (default: \(defaultApplicationIdentifier)).")
    var applicationIdentifier: String?

    /// The identifier without `--app`: this tool's own name, as a program
    /// that sets none would have.
    static let defaultApplicationIdentifier = "cachetool"
    /// Where the default identifier's stores are.
    static var defaultLocations: StoreLocations { StoreLocations(applicationIdentifier: defaultApplicationIdentifier) }

    @Option(help: "The cache directory (overrides --app).")
    var cacheDir: String?

    @Option(help: "The directory of the cookie and credential stores (overrides --app).")
    var dataDir: String?

    @Option(help: "A fleet's PostgreSQL database (a libpq connection string or postgresql:// URL; or URLLOADING_POSTGRES) instead of the folders.")
    var postgres: String?

    @Flag(help: "Print JSON instead of text.")
    var json = false

    private var locations: StoreLocations {
        StoreLocations(applicationIdentifier: applicationIdentifier ?? Self.defaultApplicationIdentifier)
    }

    var cacheDirectory: URL {
        cacheDir.map { URL(fileURLWithPath: $0, isDirectory: true) } ?? locations.cacheDirectory
    }

    var dataDirectory: URL {
        dataDir.map { URL(fileURLWithPath: $0, isDirectory: true) } ?? locations.dataDirectory
    }
}

/// Exit codes, as documented in `--help` and the cachetool article.
enum ExitStatus {
    static let failure: Int32 = 1
    static let usage: Int32 = 2
    static let notFound: Int32 = 3
    static let locked: Int32 = 4
    static let damaged: Int32 = 5

    static func code(for error: StoreError) -> Int32 {
        switch error.kind {
        case .notFound: return notFound
        case .locked: return locked
        case .corrupt, .newerSchema: return damaged
        default: return failure
        }
    }
}

/// Runs `body`, turning a `StoreError` into a message on standard error and
/// the documented exit code.
func reportingStoreErrors(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as StoreError {
        throw storeErrorExit(error)
    }
}

/// `reportingStoreErrors` for async commands.
func reportingStoreErrorsAsync(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as StoreError {
        throw storeErrorExit(error)
    }
}

/// Says what went wrong on standard error; the exit code `--help` documents.
private func storeErrorExit(_ error: StoreError) -> ExitCode {
    FileHandle.standardError.write(Data("cachetool: \(describe(error))\n".utf8))
    return ExitCode(ExitStatus.code(for: error))
}

/// The error in a person's terms: a damaged or foreign file is named once,
/// with what it is and what to do, without SQLite's own words. (`verify
/// --repair` and `clear` need a database they can open: no advice to run
/// them on one they cannot.)
func describe(_ error: StoreError) -> String {
    guard error.kind == .corrupt, let path = error.path else { return "\(error)" }
    let header = FileHandle(forReadingAtPath: path).map { handle in
        defer { try? handle.close() }
        return (try? handle.read(upToCount: 16)) ?? Data()
    }
    guard header == Data("SQLite format 3\0".utf8) else {
        return "\(path) is not a store of URLLoading (not an SQLite database) and was left alone: move it away, or remove it if nobody needs it"
    }
    if (path as NSString).lastPathComponent == "Cache.sqlite" {
        return "\(path) is a damaged cache store: the application replaces it with an empty one when it next opens it; "
            + "to start empty now, remove it and the Bodies folder beside it"
    }
    return "\(path) is a damaged store: the application moves it aside and starts an empty one when it next opens it; to do so now, move it away"
}

/// `count` with its noun, singular for one: "1 entry", "2 entries".
func counted(_ count: Int, _ singular: String, _ plural: String) -> String {
    "\(count) \(count == 1 ? singular : plural)"
}

/// Prints `value` as pretty, key-sorted JSON on standard output.
func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    let data = try encoder.encode(value)
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

func printSummary(_ summary: CacheStoreSummary, json: Bool) throws {
    if json {
        try printJSON(summary)
    } else {
        print(
            """
            store:    \(summary.path)
            schema:   version \(summary.schemaVersion)
            entries:  \(summary.entries)
            bytes:    \(summary.bytes)
            """)
    }
}

extension CacheTool {
    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create an empty cache store (what an application does on first use).")

        @OptionGroup var store: StoreOptions

        func run() throws {
            try reportingStoreErrors {
                try printSummary(try store.createCache(), json: store.json)
            }
        }
    }

    struct Info: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show where the cache store is, its schema version and usage.")

        @OptionGroup var store: StoreOptions

        func run() throws {
            try reportingStoreErrors {
                try printSummary(try store.cacheSummary(), json: store.json)
            }
        }
    }

    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check the cache store: SQLite's integrity check, and body files against the index (orphans, missing bodies).",
            discussion: "Exits 5 when the database is damaged, 1 when files and index disagree (unless repaired).")

        @OptionGroup var store: StoreOptions

        @Flag(help: "Delete orphan body files and the entries whose body file is missing.")
        var repair = false

        struct Report: Encodable {
            var path: String
            var ok: Bool
            var problems: [String]
            var orphanFiles: [String]
            var missingBodies: [String]
            var inconsistencies: [String]
            var repaired: Bool
        }

        func run() throws {
            try reportingStoreErrors {
                let result = try store.verifyCache(repair: repair)
                if store.json {
                    try printJSON(
                        Report(
                            path: result.path, ok: result.ok, problems: result.integrityProblems, orphanFiles: result.orphanFiles,
                            missingBodies: result.missingBodies, inconsistencies: result.inconsistencies, repaired: result.repaired))
                } else if result.ok {
                    print("ok: \(result.path)")
                } else {
                    print("\(result.integrityProblems.isEmpty ? "inconsistent" : "damaged"): \(result.path)")
                    result.integrityProblems.forEach { print("  \($0)") }
                    result.orphanFiles.forEach { print("  orphan body file: \($0)\(result.repaired ? " (deleted)" : "")") }
                    result.missingBodies.forEach { print("  missing body: \($0)\(result.repaired ? " (entry removed)" : "")") }
                    result.inconsistencies.forEach { print("  \($0)\(result.repaired ? " (set right)" : "")") }
                    if !result.repaired, result.integrityProblems.isEmpty { print("run with --repair to fix") }
                }
                if !result.integrityProblems.isEmpty { throw ExitCode(ExitStatus.damaged) }
                if !result.ok && !result.repaired { throw ExitCode(ExitStatus.failure) }
            }
        }
    }
}
