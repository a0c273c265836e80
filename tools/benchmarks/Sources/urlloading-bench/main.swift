// urlloading-bench: side-by-side benchmarks, every figure a ratio against a
// reference measured in the same run on the same data.
//
//   urlloading-bench cache      the HTTP cache against raw SQLite and
//                               FoundationNetworking's URLCache
//   urlloading-bench cache-postgres <conninfo>
//                               the cache on PostgreSQL against raw libpq and
//                               our SQLite tier; a fleet of workers coalescing
//   urlloading-bench cookies    cookies(for:) with 3,000 cookies against
//                               FoundationNetworking's HTTPCookieStorage
//   urlloading-bench cachetool <cachetool>
//                               cachetool list and prune on 10k and 100k entries
//   urlloading-bench session <base-url> <curl-bench> <work-dir> <sink-dir> <ws-bench>
//                               the session against libcurl's multi interface
//                               in C, FoundationNetworking and AsyncHTTPClient;
//                               WebSocket tasks against libwebsockets in C
//   urlloading-bench background <base-url> <transferd>
//                               background sessions against foreground download tasks
//
// Child modes (the bench runs itself for "new process" figures):
//   urlloading-bench child-disk-hit <ours|raw|foundation> <path> <entries> <lookups>
//   urlloading-bench child-disk-hit-busy <ours|raw> <path> <entries> <lookups>   (a writer thread storing meanwhile)
//   urlloading-bench child-open <ours|ours-phases|raw|foundation> <path> <entries> [warm]
//       (ours-phases, for profiling: open, first and second lookup, release, to stderr;
//       warm: after the process filled a dictionary, as any program has)
//   urlloading-bench child-populate <path> <entries>      (for profiling)
//   urlloading-bench child-memory-hit <lookups> [<dir>]   (for profiling; with a disk tier in dir)
//   urlloading-bench session-child <contender> <mode> <url> <count> <in-flight> [<file>]
//       contender: ours, ours-delegate, manager, foundation, async-http-client,
//       async-http-client+response (building an HTTPURLResponse from its head),
//       response-init (that initializer alone, on <url>'s head, <count> times);
//       mode: get (data(from:)), types-get (ours through data(for: HTTPRequest)),
//       observed-get (get with a tracer and a metrics backend bootstrapped),
//       download, download-task, upload-task;
//       prints elapsed s, CPU s, peak RSS KiB, bytes (response-init: fields handed over)
//   urlloading-bench resume-child <base-url>              (resume() latency)
//   urlloading-bench locks-child <url> <count>            (task lock acquisitions per GET; a counting build)
//   urlloading-bench ws-child <port> <messages> <size>    (WebSocket echo)
//   urlloading-bench session-ws <ws-bench>                 (only the WebSocket figures)
//   urlloading-bench ws-idle                               (only ws-idle-10k: 10,000 idle WebSocket tasks)
//   urlloading-bench ws-idle-child <port> <tasks> <seconds>
//   urlloading-bench session-uploads <work-dir>            (only upload-64m and upload-resume-1g)
//   urlloading-bench background-child download|enqueue|attach <url> <count>
//   urlloading-bench fleet-child <conninfo> <base-url> <urls> <concurrency>
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("urlloading-bench: \(message)\n".utf8))
    removeScratch()
    exit(1)
}

switch arguments.first {
case "cache":
    CacheBenchmark.run()
case "cache-postgres":
    guard arguments.count == 2 else { fail("usage: urlloading-bench cache-postgres <conninfo>") }
    PostgresBenchmark.run(conninfo: arguments[1])
case "fleet-child":
    guard arguments.count == 5, let urls = Int(arguments[3]), let concurrency = Int(arguments[4]), (1...10_000).contains(urls),
        (1...1_000).contains(concurrency)
    else { fail("usage: urlloading-bench fleet-child <conninfo> <base-url> <urls> <concurrency>") }
    print(await PostgresBenchmark.fleetChild(url: arguments[1], base: arguments[2], urls: urls, concurrency: concurrency))
case "cookies":
    CookieBenchmark.run()
case "cachetool":
    guard arguments.count == 2 else { fail("usage: urlloading-bench cachetool <cachetool>") }
    CachetoolBenchmark.run(cachetool: arguments[1])
case "child-disk-hit":
    guard arguments.count == 5, let entries = Int(arguments[3]), let lookups = Int(arguments[4]) else { fail("bad arguments") }
    print(CacheBenchmark.childDiskHit(kind: arguments[1], path: arguments[2], entries: entries, lookups: lookups))
case "child-disk-hit-busy":
    guard arguments.count == 5, let entries = Int(arguments[3]), let lookups = Int(arguments[4]) else { fail("bad arguments") }
    print(CacheBenchmark.childDiskHitBusy(kind: arguments[1], path: arguments[2], entries: entries, lookups: lookups))
case "child-open":
    guard arguments.count == 4 || (arguments.count == 5 && arguments[4] == "warm"), let entries = Int(arguments[3]) else { fail("bad arguments") }
    print(CacheBenchmark.childOpen(kind: arguments[1], path: arguments[2], entries: entries, warm: arguments.count == 5))
case "session":
    guard arguments.count == 6 else { fail("usage: urlloading-bench session <base-url> <curl-bench> <work-dir> <sink-dir> <ws-bench>") }
    SessionBenchmark.run(base: arguments[1], curlBench: arguments[2], work: arguments[3], sink: arguments[4], wsBench: arguments[5])
case "background":
    guard arguments.count == 3 else { fail("usage: urlloading-bench background <base-url> <transferd>") }
    BackgroundBenchmark.run(base: arguments[1], transferd: arguments[2])
case "background-child":
    guard arguments.count == 4, ["download", "enqueue", "attach"].contains(arguments[1]), let count = Int(arguments[3]), (1...100_000).contains(count)
    else { fail("usage: urlloading-bench background-child download|enqueue|attach <url> <count>") }
    print(BackgroundBenchmark.child(mode: arguments[1], url: arguments[2], count: count))
case "session-ws":
    // Only the WebSocket figures of `session` (they need no nginx).
    guard arguments.count == 2 else { fail("usage: urlloading-bench session-ws <ws-bench>") }
    var table: [(figure: String, reference: String, ratio: Double)] = []
    var lines: [String] = []
    WebSocketBenchmark.run(wsBench: arguments[1], into: &table, lines: &lines)
    lines.forEach { print($0) }
    for row in table { print("bench session \(row.figure): \(String(format: "%.2f", row.ratio))x \(row.reference)") }
case "session-uploads":
    // Only the upload figures of `session` (servers of their own, no nginx).
    guard arguments.count == 2 else { fail("usage: urlloading-bench session-uploads <work-dir>") }
    var table: [(figure: String, reference: String, ratio: Double)] = []
    var lines: [String] = []
    UploadBenchmark.run(work: arguments[1], into: &table, lines: &lines)
    ResumableUploadBenchmark.run(work: arguments[1], into: &table, lines: &lines)
    lines.forEach { print($0) }
    for row in table { print("bench session \(row.figure): \(String(format: "%.2f", row.ratio))x \(row.reference)") }
case "ws-idle":
    var lines: [String] = []
    WebSocketIdleBenchmark.run(lines: &lines)
    lines.forEach { print($0) }
case "ws-idle-child":
    guard arguments.count == 4, let port = Int(arguments[1]), (1...65535).contains(port), let count = Int(arguments[2]), (1...100_000).contains(count),
        let seconds = Int(arguments[3]), (1...3600).contains(seconds)
    else { fail("usage: urlloading-bench ws-idle-child <port> <tasks> <seconds>") }
    print(WebSocketIdleBenchmark.child(port: port, count: count, seconds: seconds))
case "ws-child":
    guard arguments.count == 4, let port = Int(arguments[1]), (1...65535).contains(port), let count = Int(arguments[2]), count > 0,
        let size = Int(arguments[3]), (1...(1 << 30)).contains(size)
    else { fail("usage: urlloading-bench ws-child <port> <messages> <size>") }
    print(await WebSocketBenchmark.child(port: port, count: count, size: size))
case "session-child":
    guard arguments.count == 6 || arguments.count == 7, let count = Int(arguments[4]), let inFlight = Int(arguments[5]) else { fail("bad arguments") }
    print(
        await SessionBenchmark.child(
            contender: arguments[1], mode: arguments[2], url: arguments[3], count: count, inFlight: inFlight,
            path: arguments.count == 7 ? arguments[6] : nil))
case "locks-child":
    guard arguments.count == 3, let count = Int(arguments[2]), (1...10_000_000).contains(count) else { fail("usage: urlloading-bench locks-child <url> <count>") }
    print(await LockCountBenchmark.child(url: arguments[1], count: count))
case "resume-child":
    guard arguments.count == 2 else { fail("usage: urlloading-bench resume-child <base-url>") }
    print(ResumeBenchmark.child(base: arguments[1]))
case "child-memory-hit":
    guard arguments.count == 2 || arguments.count == 3, let lookups = Int(arguments[1]), (1...1_000_000_000).contains(lookups) else {
        fail("usage: urlloading-bench child-memory-hit <lookups> [<disk-tier-directory>]")
    }
    print(CacheBenchmark.memoryHitOurs(lookups, disk: arguments.count == 3 ? arguments[2] : nil))
case "child-populate":
    guard arguments.count == 3, let entries = Int(arguments[2]) else { fail("bad arguments") }
    CacheBenchmark.populateOurs(arguments[1], entries)
default:
    fail("usage: urlloading-bench cache|cookies|cachetool <cachetool>|session <base-url> <curl-bench> <work-dir> <sink-dir> <ws-bench>")
}
removeScratch()
