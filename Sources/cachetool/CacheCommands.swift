import ArgumentParser
import Foundation
@_spi(Tools) import URLLoading
#if canImport(Glibc)
import Glibc
#endif

/// Request fields given as `-H "Name: value"`.
func parseHeaders(_ lines: [String]) throws -> [(name: String, value: String)] {
    try lines.map { line in
        guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
            throw ValidationError("a header must look like \"Name: value\", not \"\(line)\"")
        }
        return (String(line[..<colon]).trimmingCharacters(in: .whitespaces), String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces))
    }
}

func parseURL(_ text: String) throws -> URL {
    guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
        throw ValidationError("not an http or https URL: \(text)")
    }
    return url
}

/// Request and response fields whose values are secrets.
let secretFields: Set<String> = ["authorization", "proxy-authorization", "cookie", "set-cookie"]

func redacted(_ field: (name: String, value: String)) -> (name: String, value: String) {
    secretFields.contains(field.name.lowercased()) ? (field.name, "<redacted>") : field
}

/// UTC, `2026-11-22T06:03:38Z`, without a formatter per call (a listing
/// prints two per line).
func formatDate(_ seconds: Double) -> String {
    // Times read from a store may be anything: years 1...9999 are shown, others named.
    guard seconds.isFinite else { return "invalid" }
    guard seconds >= -62_135_596_800 else { return "before year 1" }
    guard seconds < 253_402_300_800 else { return "after year 9999" }
    var time = time_t(seconds.rounded(.down))
    var parts = tm()
    gmtime_r(&time, &parts)
    func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
    return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
}

func formatDuration(_ seconds: Double) -> String {
    let value = abs(seconds)
    guard value.isFinite, value < 1e15 else { return seconds.isNaN ? "invalid" : seconds < 0 ? "-forever" : "forever" }
    let text = value < 120 ? "\(Int(value))s" : value < 7200 ? "\(Int(value / 60))m" : value < 172_800 ? "\(Int(value / 3600))h" : "\(Int(value / 86_400))d"
    return seconds < 0 ? "-" + text : text
}

/// `30s`, `15m`, `2h`, `7d`, `1w`.
func parseDuration(_ text: String) throws -> TimeInterval {
    let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800]
    let seconds: Double
    if let unit = text.last, let factor = units[unit], let number = Double(text.dropLast()), number >= 0 {
        seconds = number * factor
    } else if let number = Double(text), number >= 0 {
        seconds = number
    } else {
        throw ValidationError("a duration looks like 30s, 15m, 2h, 7d or 1w, not \(text)")
    }
    // Numbers from the command line are checked before they are used.
    guard seconds.isFinite, seconds <= maximumDuration else {
        throw ValidationError("\(text) is longer than any age a store can hold (at most 10000 years)")
    }
    return seconds
}

/// The longest duration taken from the command line: 10,000 years.
let maximumDuration: TimeInterval = 10_000 * 365.25 * 86_400

/// `1048576`, `512K`, `10M`, `1G` (powers of 1024; a trailing B is allowed).
func parseSize(_ text: String) throws -> Int {
    var body = text.uppercased()
    if body.hasSuffix("B") { body.removeLast() }
    let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
    if let unit = body.last, let factor = units[unit], let number = Double(body.dropLast()), number >= 0 {
        let bytes = number * Double(factor)
        // Numbers from the command line are checked before conversion.
        guard bytes.isFinite, bytes <= Double(1 << 60) else { throw ValidationError("\(text) is larger than any store (at most 1024P)") }
        return Int(bytes)
    }
    guard let bytes = Int(body), bytes >= 0 else { throw ValidationError("a size looks like 1048576, 512K, 10M or 1G, not \(text)") }
    return bytes
}

/// One line on standard output, unbuffered: a listing's first line appears at once.
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Progress on standard error, only when it is a terminal.
struct ProgressLine {
    let label: String
    let enabled = isatty(STDERR_FILENO) != 0
    func update(_ count: Int) {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\(label): \(count)".utf8))
    }
    func finish() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\n".utf8))
    }
}

extension CacheTool {
    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List stored responses: URL, status, size, stored, last used, freshness, tier.")

        @OptionGroup var store: StoreOptions
        @Option(help: "Only this host.") var host: String?
        @Option(help: "Only URLs matching this shell glob, e.g. 'https://api.example.com/v1/*'.") var url: String?
        @Option(help: "Only this status code.") var status: Int?
        @Flag(help: "Only stale entries.") var stale = false
        @Flag(help: "Only fresh entries.") var fresh = false
        @Option(help: "Order by last-used, stored, size or url (largest or latest first; see --ascending).") var sort = "last-used"
        @Flag(help: "Smallest or oldest first.") var ascending = false
        @Option(help: "At most this many entries.") var limit: Int?

        func validate() throws {
            if stale && fresh { throw ValidationError("--stale and --fresh exclude each other") }
            if CacheListQuery.Order(rawValue: sort) == nil {
                throw ValidationError("--sort takes \(CacheListQuery.Order.allCases.map(\.rawValue).joined(separator: ", "))")
            }
        }

        func run() throws {
            var query = CacheListQuery()
            query.host = host
            query.urlGlob = url
            query.status = status
            query.fresh = stale ? false : fresh ? true : nil
            query.order = CacheListQuery.Order(rawValue: sort) ?? .lastUsed
            query.descending = !ascending
            query.limit = limit
            let now = Date().timeIntervalSince1970
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            try reportingStoreErrors {
                // Opening first: a missing store is reported before any output.
                _ = try store.cacheSummary()
                // JSON is one object per line (JSON Lines), so the first entry prints at once.
                if !store.json { emit("STATUS  SIZE        STORED                LAST USED             FRESHNESS   TIER  URL") }
                try store.cacheEntries(query) { entry in
                    if store.json {
                        guard let data = try? encoder.encode(entry) else { return true }
                        FileHandle.standardOutput.write(data + Data("\n".utf8))
                    } else {
                        let freshness = entry.isFresh ? "fresh \(formatDuration(entry.freshUntil - now))" : "stale \(formatDuration(now - entry.freshUntil))"
                        let line = [
                            String(entry.status).padding(toLength: 7, withPad: " ", startingAt: 0),
                            String(entry.bodySize).padding(toLength: 11, withPad: " ", startingAt: 0),
                            formatDate(entry.storedAt).padding(toLength: 21, withPad: " ", startingAt: 0),
                            formatDate(entry.lastUsed).padding(toLength: 21, withPad: " ", startingAt: 0),
                            freshness.padding(toLength: 11, withPad: " ", startingAt: 0),
                            entry.tier.padding(toLength: 5, withPad: " ", startingAt: 0),
                            entry.url,
                        ].joined(separator: " ")
                        emit(line)
                    }
                    return true
                }
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show one stored response: headers (secrets redacted), body size and type, freshness, storage policy, userInfo keys.")

        @OptionGroup var store: StoreOptions
        @Argument(help: "The URL.") var url: String
        @Option(name: .customShort("H"), help: "A request header the stored variant must match (Vary), as \"Name: value\".") var header: [String] = []
        @Option(help: "Write the body to this file.") var body: String?

        struct Report: Encodable {
            var url: String
            var status: Int
            var requestFields: [[String]]
            var responseFields: [[String]]
            var bodySize: Int
            var contentType: String?
            var storedAt: String
            var freshnessLifetime: Double?
            var freshnessSource: String?
            var currentAge: Double?
            var storagePolicy: String
            var userInfoKeys: [String]
        }

        func run() throws {
            let target = try parseURL(url)
            let headers = try parseHeaders(header)
            try reportingStoreErrors {
                guard let snapshot = try store.cacheSnapshot(target, requestHeaders: headers) else {
                    FileHandle.standardError.write(Data("cachetool: nothing stored for \(CachedURL.displayed(url)) (see `cachetool list`)\n".utf8))
                    throw ExitCode(ExitStatus.notFound)
                }
                let explanation = try store.explainCache(target, requestHeaders: headers)
                let report = Report(
                    url: snapshot.url, status: snapshot.status,
                    requestFields: snapshot.varyRequestHeaders.map(redacted).map { [$0.name, $0.value] },
                    responseFields: snapshot.responseHeaders.map(redacted).map { [$0.name, $0.value] },
                    bodySize: snapshot.body.count,
                    contentType: snapshot.responseHeaders.first { $0.name.lowercased() == "content-type" }?.value,
                    storedAt: formatDate(snapshot.storedAt.timeIntervalSince1970),
                    freshnessLifetime: explanation.freshnessLifetime, freshnessSource: explanation.freshnessSource,
                    currentAge: explanation.currentAge, storagePolicy: "\(snapshot.storagePolicy)",
                    userInfoKeys: snapshot.userInfoKeys)
                if let body {
                    do {
                        try snapshot.body.write(to: URL(fileURLWithPath: body))
                    } catch {
                        FileHandle.standardError.write(Data("cachetool: cannot write the body to \(body): \(error.localizedDescription)\n".utf8))
                        throw ExitCode(ExitStatus.failure)
                    }
                }
                if store.json {
                    try printJSON(report)
                    return
                }
                print("\(report.url)\nstatus: \(report.status)")
                print("request fields Vary selects on:")
                report.requestFields.forEach { print("  \($0[0]): \($0[1])") }
                print("response fields:")
                report.responseFields.forEach { print("  \($0[0]): \($0[1])") }
                print("body: \(counted(report.bodySize, "byte", "bytes"))\(report.contentType.map { ", \($0)" } ?? "")\(body.map { " (written to \($0))" } ?? "")")
                print("stored: \(report.storedAt)")
                if let lifetime = report.freshnessLifetime, let age = report.currentAge {
                    print(
                        "freshness: lifetime \(formatDuration(lifetime)) from \(report.freshnessSource ?? "?"), age \(formatDuration(age)), \(lifetime > age ? "fresh for \(formatDuration(lifetime - age))" : "stale")"
                    )
                }
                print("storage policy: \(report.storagePolicy)")
                print("userInfo keys: \(report.userInfoKeys.isEmpty ? "none" : report.userInfoKeys.joined(separator: ", "))")
            }
        }
    }

    struct Stats: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Entries, bytes, the library's hit/miss/revalidation counters, top hosts, an age histogram.")

        @OptionGroup var store: StoreOptions

        func run() throws {
            try reportingStoreErrors {
                let stats = try store.cacheStats()
                if store.json {
                    try printJSON(stats)
                    return
                }
                print("store:    \(stats.path)")
                print("entries:  \(stats.entries) (\(stats.inlineBodies) bodies inline, \(stats.fileBodies) in files)")
                print("disk:     \(stats.diskBytes) bytes (the memory tier lives in each application's process)")
                let counter = { (name: String) in stats.counters[name] ?? 0 }
                print(
                    "lookups:  \(counter("hits")) hits, \(counter("misses")) misses; revalidations: \(counter("revalidations-not-modified")) not modified, \(counter("revalidations-replaced")) replaced"
                )
                print("top hosts:")
                stats.topHosts.forEach { print("  \($0.host): \($0.entries) entries, \($0.bytes) bytes") }
                print("ages:")
                stats.ages.forEach { print("  \($0.age): \($0.entries)") }
            }
        }
    }

    struct Explain: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Would a request be served from the cache now, and why (without touching the network).")

        @OptionGroup var store: StoreOptions
        @Argument(help: "The URL.") var url: String
        @Option(name: .customShort("H"), help: "A request header, as \"Name: value\" (Vary, Cache-Control).") var header: [String] = []

        func run() throws {
            let target = try parseURL(url)
            let headers = try parseHeaders(header)
            try reportingStoreErrors {
                let explanation = try store.explainCache(target, requestHeaders: headers)
                if store.json {
                    try printJSON(explanation)
                    return
                }
                print("\(CachedURL.displayed(url)): \(explanation.action)")
                if let lifetime = explanation.freshnessLifetime, let age = explanation.currentAge {
                    print("  freshness lifetime: \(formatDuration(lifetime)) (\(explanation.freshnessSource ?? "?"))")
                    print("  current age:        \(formatDuration(age))")
                }
                if let vary = explanation.varyMatch { print("  vary:               \(vary)") }
                explanation.reasons.forEach { print("  - \($0)") }
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove every stored variant of a URL.")

        @OptionGroup var store: StoreOptions
        @Argument(help: "The URL.") var url: String

        func run() throws {
            let target = try parseURL(url)
            try reportingStoreErrors {
                let removed = try store.removeCached(target)
                if store.json { try printJSON(["removed": removed]) } else { print("removed \(counted(removed, "entry", "entries"))") }
                if removed == 0 { throw ExitCode(ExitStatus.notFound) }
            }
        }
    }

    struct Prune: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove entries by age, total size, host or staleness.",
            discussion: "Give exactly one of the options. Shows progress on a terminal.")

        @OptionGroup var store: StoreOptions
        @Option(help: "Entries stored longer ago than this (30s, 15m, 2h, 7d, 1w).") var olderThan: String?
        @Option(help: "Least recently used entries until the store holds at most this (512K, 10M, 1G).") var toSize: String?
        @Option(help: "Every entry of this host.") var host: String?
        @Flag(help: "Every entry that is stale now.") var stale = false

        func validate() throws {
            let given = [olderThan != nil, toSize != nil, host != nil, stale].filter { $0 }.count
            if given != 1 { throw ValidationError("give exactly one of --older-than, --to-size, --host, --stale") }
        }

        func run() throws {
            let rule: CacheMaintenance.PruneRule
            if let olderThan {
                rule = .olderThan(try parseDuration(olderThan))
            } else if let toSize {
                rule = .toSize(try parseSize(toSize))
            } else if let host {
                rule = .host(host)
            } else {
                rule = .stale
            }
            let progress = ProgressLine(label: "pruning")
            try reportingStoreErrors {
                let removed = try store.pruneCache(rule, progress: progress.update)
                progress.finish()
                let summary = try store.cacheSummary()
                if store.json {
                    try printJSON(["removed": removed, "entries": summary.entries, "bytes": summary.bytes])
                } else {
                    print("removed \(counted(removed, "entry", "entries")); \(counted(summary.entries, "entry", "entries")), \(counted(summary.bytes, "byte", "bytes")) left")
                }
            }
        }
    }

    struct Clear: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove every stored response.")

        @OptionGroup var store: StoreOptions

        func run() throws {
            try reportingStoreErrors {
                let removed = try store.pruneCache(.all)
                if store.json { try printJSON(["removed": removed]) } else { print("removed \(counted(removed, "entry", "entries"))") }
            }
        }
    }

    struct Vacuum: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Give the database's free pages back to the file system.")

        @OptionGroup var store: StoreOptions

        func run() throws {
            try reportingStoreErrors {
                let path = store.cacheDirectory.appendingPathComponent("Cache.sqlite").path
                let before = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
                try store.vacuumCache()
                let after = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
                if store.json { try printJSON(["bytesBefore": before, "bytesAfter": after]) } else { print("\(path): \(before) -> \(after) bytes") }
            }
        }
    }
}
