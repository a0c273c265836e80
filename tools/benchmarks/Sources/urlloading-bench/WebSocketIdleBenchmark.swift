import Foundation
import Locking
import NIOCore
import NIOPosix
import URLLoading

/// `ws-idle-10k`: many open WebSocket tasks that are mostly idle, as a
/// server's push feeds are: 10,000 tasks to the echo server of
/// `ws-echo` (SwiftNIO, in this process), each pinged once a second for
/// 30 seconds. What counts is what holding them costs: the threads the
/// child process adds for them, its peak RSS, its CPU per ping, and that
/// every ping is answered.
enum WebSocketIdleBenchmark {
    static let tasks = 10_000
    static let seconds = 30

    static func run(lines: inout [String]) {
        raiseDescriptorLimit()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let server: any Channel
        do { server = try WebSocketBenchmark.startEchoServer(group: group) } catch { fail("the WebSocket echo server did not start: \(error)") }
        defer { try? server.close().wait() }
        guard let port = server.localAddress?.port else { fail("the echo server has no port") }
        let fields = runChildText(["ws-idle-child", "\(port)", "\(tasks)", "\(seconds)"]).split(separator: " ").compactMap { Double($0) }
        guard fields.count == 8 else { fail("ws-idle-child printed \(fields)") }
        let (opened, answered, sent, threads, streamThreads, rss, cpu, worst) =
            (fields[0], fields[1], fields[2], fields[3], fields[4], fields[5], fields[6], fields[7])
        lines.append(
            "ws-idle-10k: \(tasks) WebSocket tasks opened in \(formatted(opened)) s; pings answered \(Int(answered))/\(Int(sent)); "
                + "threads added \(Int(threads)) (stream loops and connecting threads \(Int(streamThreads))); peak RSS \(Int(rss / 1024)) MiB; "
                + "CPU \(formatted(cpu / max(1, answered) * 1e6)) µs per ping; slowest round of pings answered in \(formatted(worst * 1000)) ms")
    }

    /// 10,000 sockets on each side, with the descriptors a process already
    /// has: the soft limit raised to the hard one.
    static func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    /// The threads of this process, and those of them whose name begins with `prefix`.
    static func threads(named prefix: String = "") -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        guard !prefix.isEmpty else { return tasks.count }
        return tasks.count { task in
            (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?.hasPrefix(prefix) ?? false
        }
    }

    /// Pings every task once and waits (at most `timeout` seconds) for the
    /// pongs; the number answered.
    static func pingAll(_ tasks: [SessionWebSocketTask], timeout: Double) -> Int {
        let answered = Lock(0)
        let settled = Lock(0)
        let done = DispatchSemaphore(value: 0)
        for task in tasks {
            task.sendPing { error in
                if error == nil { answered.withLock { $0 += 1 } }
                if settled.withLock({ settled in
                    settled += 1
                    return settled == tasks.count
                }) {
                    done.signal()
                }
            }
        }
        _ = done.wait(timeout: .now() + timeout)
        return answered.withLock { $0 }
    }

    /// The child: opens `count` tasks, then pings each once a second for
    /// `seconds` rounds. Prints: seconds to open them all, pings answered,
    /// pings sent, threads added at most, of which stream loops and
    /// connecting threads, peak RSS KiB, CPU s of the rounds, the slowest
    /// round's seconds.
    static func child(port: Int, count: Int, seconds: Int) -> String {
        raiseDescriptorLimit()
        guard let url = URL(string: "ws://127.0.0.1:\(port)/") else { fail("bad port") }
        let before = threads()
        let session = Session(configuration: .ephemeral)
        let start = now()
        let tasks = (0..<count).map { _ in session.webSocketTask(with: url) }
        tasks.forEach { $0.resume() }
        // The first ping's pong says the task is open.
        guard pingAll(tasks, timeout: 300) == count else { fail("not every WebSocket task opened") }
        let opened = Double(now() - start) / 1e9
        var answered = 0
        var mostThreads = threads() - before
        var mostStreamThreads = threads(named: "URLStream")
        var worst = 0.0
        let cpuBefore = SessionBenchmark.rusage().cpu
        for round in 0..<seconds {
            let roundStart = now()
            answered += pingAll(tasks, timeout: 30)
            worst = max(worst, Double(now() - roundStart) / 1e9)
            mostThreads = max(mostThreads, threads() - before)
            mostStreamThreads = max(mostStreamThreads, threads(named: "URLStream"))
            let next = start + UInt64(round + 1) * 1_000_000_000 + UInt64(opened * 1e9)
            let current = now()
            if next > current { usleep(UInt32(min(1_000_000, (next - current) / 1000))) }
        }
        let cpu = SessionBenchmark.rusage().cpu - cpuBefore
        tasks.forEach { $0.cancel(with: .normalClosure, reason: nil) }
        return "\(opened) \(answered) \(count * seconds) \(mostThreads) \(mostStreamThreads) \(SessionBenchmark.peakRSSKiB()) \(cpu) \(worst)"
    }
}
