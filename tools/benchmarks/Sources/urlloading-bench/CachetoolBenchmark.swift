import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `urlloading-bench cachetool <cachetool>`: on caches of 10,000 and
/// 100,000 entries, the time until `cachetool list` prints its first entry
/// and the peak RSS of `list` and of `prune --to-size` (which must not grow
/// with the entry count).
enum CachetoolBenchmark {
    /// Runs `arguments`; returns seconds to the first entry line (the line
    /// after the header), total seconds, and the child's peak RSS in KiB.
    static func measure(_ executable: String, _ arguments: [String]) -> (firstLine: Double, total: Double, rssKiB: Int) {
        var pipe: [Int32] = [0, 0]
        guard Glibc.pipe(&pipe) == 0 else { fail("pipe failed") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_adddup2(&actions, pipe[1], 1)
        posix_spawn_file_actions_addclose(&actions, pipe[0])
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let start = now()
        guard posix_spawn(&pid, executable, &actions, nil, argv, environ) == 0 else { fail("cannot start \(executable)") }
        close(pipe[1])
        var firstLine = 0.0
        var lines = 0
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(pipe[0], &buffer, buffer.count)
            guard count > 0 else { break }
            if firstLine == 0 {
                lines += buffer[0..<count].filter { $0 == 10 }.count
                if lines >= 2 { firstLine = Double(now() - start) / 1e9 }
            }
        }
        close(pipe[0])
        var status: Int32 = 0
        var usage = rusage()
        wait4(pid, &status, 0, &usage)
        let total = Double(now() - start) / 1e9
        guard status == 0 else { fail("\(arguments) exited with status \(status)") }
        return (firstLine == 0 ? total : firstLine, total, Int(usage.ru_maxrss))
    }

    static func run(cachetool: String) {
        print("cachetool on caches of 10,000 and 100,000 entries (1 KiB bodies), cachetool built in release mode")
        var figures: [Int: (first: Double, listRSS: Int, pruneRSS: Int, prune: Double)] = [:]
        for entries in [10_000, 100_000] {
            let path = scratchDirectory("cachetool-\(entries)")
            _ = runChildText(["child-populate", path, String(entries)])
            let list = measure(cachetool, ["list", "--cache-dir", path])
            let prune = measure(cachetool, ["prune", "--cache-dir", path, "--to-size", "1M"])
            figures[entries] = (list.firstLine, list.rssKiB, prune.rssKiB, prune.total)
            print(
                "  \(entries) entries: list first entry after \(formatted(list.firstLine * 1000)) ms (all in \(formatted(list.total * 1000)) ms), "
                    + "peak RSS \(list.rssKiB / 1024) MiB; prune --to-size 1M \(formatted(prune.total * 1000)) ms, peak RSS \(prune.rssKiB / 1024) MiB")
            try? FileManager.default.removeItem(atPath: path)
        }
        guard let small = figures[10_000], let big = figures[100_000] else { return }
        print("bench cachetool list-first-line: \(formatted(big.first)) s (target: under 1 s)")
        print("bench cachetool list-rss: \(String(format: "%.2f", Double(big.listRSS) / Double(small.listRSS)))x 10k-entries")
        print("bench cachetool prune-rss: \(String(format: "%.2f", Double(big.pruneRSS) / Double(small.pruneRSS)))x 10k-entries")
    }
}
