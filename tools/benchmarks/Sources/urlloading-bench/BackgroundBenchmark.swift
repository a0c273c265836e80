import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import URLLoading

/// `tools/bench background`: background sessions through the
/// release transferd, against foreground download tasks of the same
/// process kind, on one nginx; each run in XDG folders of its own so that
/// its transferd and journal are its own.
enum BackgroundBenchmark {
    static let queued = 1000
    static let runs = 3

    /// One XDG world: folders, the environment of its apps, its transferd.
    struct World {
        let root: String
        let transferd: String
        var environment: [String: String] {
            var environment = ProcessInfo.processInfo.environment
            environment["XDG_RUNTIME_DIR"] = root + "/run"
            environment["XDG_DATA_HOME"] = root + "/data"
            environment["XDG_STATE_HOME"] = root + "/state"
            environment["URLLOADING_TRANSFERD"] = transferd
            return environment
        }
        var journal: String { root + "/data/urlloading/transferd/Journal.sqlite" }

        init(transferd: String) {
            // Short: the socket path under it must fit a sockaddr_un (108 bytes).
            root = NSTemporaryDirectory() + "bg-\(UUID().uuidString.prefix(8))"
            self.transferd = transferd
            try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }

        /// Ends this world's transferd and removes its folders.
        func end() {
            let lock = root + "/run/urlloading/transferd.lock"
            if let text = try? String(contentsOfFile: lock, encoding: .utf8), let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 0 {
                kill(pid, SIGKILL)
            }
            try? FileManager.default.removeItem(atPath: root)
        }

        /// Journal bytes on disk (the database and its write-ahead log).
        var journalBytes: Int {
            [journal, journal + "-wal"].reduce(0) { total, path in
                total + ((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0)
            }
        }

        func child(_ arguments: [String]) -> SessionBenchmark.Figures {
            SessionBenchmark.parse(runChildText(["background-child"] + arguments, environment: environment))
        }
    }

    static func run(base: String, transferd: String) {
        var table: [(figure: String, reference: String, ratio: Double)] = []
        var lines: [String] = []
        let big = base + "/1g", small = base + "/1k"

        // 1 GiB to a file: foreground download task against a background one, in turns.
        var foreground: SessionBenchmark.Figures?
        var background: SessionBenchmark.Figures?
        for _ in 0..<runs {
            let f = SessionBenchmark.parse(runChildText(["session-child", "ours", "download-task", big, "1", "1"]))
            if foreground.map({ f.elapsed < $0.elapsed }) ?? true { foreground = f }
            let world = World(transferd: transferd)
            let b = world.child(["download", big, "1"])
            world.end()
            if background.map({ b.elapsed < $0.elapsed }) ?? true { background = b }
        }
        if let foreground, let background {
            table.append(("download-1g", "foreground-task", background.elapsed / foreground.elapsed))
            lines.append(
                "download-1g (best of \(runs)): background \(formatted(1024 / background.elapsed)) MiB/s, app peak RSS \(Int(background.peakRSSKiB / 1024)) MiB; "
                    + "foreground download task \(formatted(1024 / foreground.elapsed)) MiB/s, peak RSS \(Int(foreground.peakRSSKiB / 1024)) MiB")
        }

        // 1,000 queued 1 KiB downloads, each delivered to the attached app, against
        // 1,000 foreground download tasks 16 at a time; the journal's bytes per task.
        var queuedBest: SessionBenchmark.Figures?
        var perTaskBytes = 0.0
        var foregroundQueued: SessionBenchmark.Figures?
        for _ in 0..<runs {
            let f = SessionBenchmark.parse(runChildText(["session-child", "ours", "download-task", small, "\(queued)", "16"]))
            if foregroundQueued.map({ f.elapsed < $0.elapsed }) ?? true { foregroundQueued = f }
            let world = World(transferd: transferd)
            let b = world.child(["download", small, "\(queued)"])
            if queuedBest.map({ b.elapsed < $0.elapsed }) ?? true {
                queuedBest = b
                perTaskBytes = Double(world.journalBytes) / Double(queued)
            }
            world.end()
        }
        if let queuedBest, let foregroundQueued {
            let ours = queuedBest.elapsed / Double(queued) * 1e6, theirs = foregroundQueued.elapsed / Double(queued) * 1e6
            table.append(("queued-1k", "foreground-task", queuedBest.elapsed / foregroundQueued.elapsed))
            lines.append(
                "queued-1k (\(queued) tasks, best of \(runs)): background \(formatted(ours)) µs per task (app CPU \(formatted(queuedBest.cpu / Double(queued) * 1e6)) µs), "
                    + "journal \(Int(perTaskBytes)) bytes per task; foreground download tasks 16 at a time \(formatted(theirs)) µs per task; "
                    + "background overhead \(formatted(ours - theirs)) µs per task")
        }

        // Attach to 1,000 finished tasks: every event delivered, then urlSessionDidFinishEvents.
        let world = World(transferd: transferd)
        _ = world.child(["enqueue", small, "\(queued)"])
        let finished = waitUntilFinished(world, count: queued)
        if finished {
            let attach = world.child(["attach", small, "\(queued)"])
            table.append(("attach-1000", "2-second-target", attach.elapsed / 2))
            lines.append("attach with \(queued) finished tasks: every event delivered in \(formatted(attach.elapsed * 1000)) ms (target 2,000 ms)")
        } else {
            lines.append("attach with \(queued) finished tasks: transferd did not finish them within 120 s")
        }
        world.end()

        print("urlloading-bench background: against nginx on loopback\n")
        lines.forEach { print($0) }
        print("")
        for row in table { print("bench background \(row.figure): \(String(format: "%.2f", row.ratio))x \(row.reference)") }
    }

    /// Polls `transferd list --json` (bounded: 120 s) until `count` tasks finished.
    static func waitUntilFinished(_ world: World, count: Int) -> Bool {
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: world.transferd)
            process.arguments = ["list", "--json"]
            process.environment = world.environment
            let pipe = Pipe()
            process.standardOutput = pipe
            guard (try? process.run()) != nil else { return false }
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            if output.components(separatedBy: "\"state\":\"finished\"").count - 1 >= count { return true }
            Thread.sleep(forTimeInterval: 0.2)  // a poll interval, not a synchronisation
        }
        return false
    }

    // MARK: The app (a child process)

    final class Delegate: SessionDownloadDelegate, Sendable {
        let state = Lock<(completed: Int, bytes: Int, failures: Int, eventsDone: Bool)>((0, 0, 0, false))
        let done = DispatchSemaphore(value: 0)
        let expected: Int
        let waitsForEvents: Bool
        /// The app leaves with its tasks' events undelivered (`enqueue`):
        /// a task that finishes before it is gone is never acknowledged.
        let holdsEvents: Bool
        private let never = DispatchSemaphore(value: 0)

        init(expected: Int, waitsForEvents: Bool, holdsEvents: Bool = false) {
            self.expected = expected
            self.waitsForEvents = waitsForEvents
            self.holdsEvents = holdsEvents
        }

        func urlSession(_ session: Session, downloadTask: SessionTask, didFinishDownloadingTo location: URL) {
            // Bounded: the process exits long before.
            if holdsEvents { _ = never.wait(timeout: .now() + 600) }
            let size = (try? FileManager.default.attributesOfItem(atPath: location.path)[.size] as? Int) ?? 0
            state.withLock { $0.bytes += size }
        }
        func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
            let finished = state.withLock { state -> Bool in
                state.completed += 1
                if error != nil { state.failures += 1 }
                return state.completed == expected && !waitsForEvents
            }
            if finished { done.signal() }
        }
        func urlSessionDidFinishEvents(forBackgroundURLSession session: Session) {
            let finished = state.withLock { state -> Bool in
                state.eventsDone = true
                return waitsForEvents
            }
            if finished { done.signal() }
        }
    }

    /// `background-child download|enqueue|attach <url> <count>`.
    static func child(mode: String, url: String, count: Int) -> String {
        guard let target = URL(string: url) else { fail("bad URL \(url)") }
        let configuration = SessionConfiguration.background(withIdentifier: "bench")
        configuration.sessionSendsLaunchEvents = false
        let delegate = Delegate(expected: count, waitsForEvents: mode == "attach", holdsEvents: mode == "enqueue")
        let before = SessionBenchmark.rusage().cpu
        let start = now()
        let session = Session(configuration: configuration, delegate: delegate)
        if let error = session.startupErrors.first { fail("the background session did not start: \(error)") }
        if mode != "attach" {
            for _ in 0..<count { session.downloadTask(with: URLRequest(url: target)).resume() }
        }
        if mode == "enqueue" {
            // The app leaves once its tasks are handed over; transferd carries them.
            let listed = DispatchSemaphore(value: 0)
            session.getAllTasks { _ in listed.signal() }
            _ = listed.wait(timeout: .now() + 60)
            return "0 0 \(SessionBenchmark.rusage().rssKiB) 0"
        }
        guard delegate.done.wait(timeout: .now() + 600) == .success else { fail("background tasks did not complete within 600 s") }
        let elapsed = Double(now() - start) / 1e9
        let (completed, bytes, failures, _) = delegate.state.withLock { $0 }
        guard completed == count, failures == 0 else { fail("\(completed) of \(count) completed, \(failures) failed") }
        return "\(elapsed) \(SessionBenchmark.rusage().cpu - before) \(SessionBenchmark.rusage().rssKiB) \(bytes)"
    }
}
