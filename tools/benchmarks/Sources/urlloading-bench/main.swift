// urlloading-bench: side-by-side benchmarks, every figure a ratio against a
// reference measured in the same run on the same data.
//
//   urlloading-bench cache      the HTTP cache against raw SQLite and
//                               FoundationNetworking's URLCache
//   urlloading-bench cookies    cookies(for:) with 3,000 cookies against
//                               FoundationNetworking's HTTPCookieStorage
//   urlloading-bench cachetool <cachetool>
//                               cachetool list and prune on 10k and 100k entries
//   urlloading-bench session <base-url> <curl-bench> <work-dir> <sink-dir>
//                               the session against libcurl's multi interface
//                               in C, FoundationNetworking and AsyncHTTPClient
//
// Child modes (the bench runs itself for "new process" figures):
//   urlloading-bench child-disk-hit <ours|raw|foundation> <path> <entries> <lookups>
//   urlloading-bench child-open <ours|raw|foundation> <path> <entries>
//   urlloading-bench child-populate <path> <entries>      (for profiling)
//   urlloading-bench resume-child <base-url>              (resume() latency)
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("urlloading-bench: \(message)\n".utf8))
    exit(1)
}

switch arguments.first {
case "cache":
    CacheBenchmark.run()
case "cookies":
    CookieBenchmark.run()
case "cachetool":
    guard arguments.count == 2 else { fail("usage: urlloading-bench cachetool <cachetool>") }
    CachetoolBenchmark.run(cachetool: arguments[1])
case "child-disk-hit":
    guard arguments.count == 5, let entries = Int(arguments[3]), let lookups = Int(arguments[4]) else { fail("bad arguments") }
    print(CacheBenchmark.childDiskHit(kind: arguments[1], path: arguments[2], entries: entries, lookups: lookups))
case "child-open":
    guard arguments.count == 4, let entries = Int(arguments[3]) else { fail("bad arguments") }
    print(CacheBenchmark.childOpen(kind: arguments[1], path: arguments[2], entries: entries))
case "session":
    guard arguments.count == 5 else { fail("usage: urlloading-bench session <base-url> <curl-bench> <work-dir> <sink-dir> <sink-dir>") }
    SessionBenchmark.run(base: arguments[1], curlBench: arguments[2], work: arguments[3], sink: arguments[4])
case "session-child":
    guard arguments.count == 6 || arguments.count == 7, let count = Int(arguments[4]), let inFlight = Int(arguments[5]) else { fail("bad arguments") }
    print(
        await SessionBenchmark.child(
            contender: arguments[1], mode: arguments[2], url: arguments[3], count: count, inFlight: inFlight,
            path: arguments.count == 7 ? arguments[6] : nil))
case "resume-child":
    guard arguments.count == 2 else { fail("usage: urlloading-bench resume-child <base-url>") }
    print(ResumeBenchmark.child(base: arguments[1]))
case "child-populate":
    guard arguments.count == 3, let entries = Int(arguments[2]) else { fail("bad arguments") }
    CacheBenchmark.populateOurs(arguments[1], entries)
default:
    fail("usage: urlloading-bench cache|cookies|cachetool <cachetool>|session <base-url> <curl-bench> <work-dir> <sink-dir>")
}
