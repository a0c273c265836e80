public import Foundation

/// Runs programs as child processes for tests that need several processes
/// on the same files, or that test a command-line tool as a user runs it.
public enum ChildProcess {
    /// What a finished child left behind.
    public struct Result: Sendable {
        /// The exit status, or 128 + signal number when killed.
        public let status: Int32
        /// Whether it was ended by a signal.
        public let signalled: Bool
        public let standardOutput: String
        public let standardError: String
    }

    /// The directory of the executables SwiftPM built with the tests (the
    /// test bundle lives there too).
    public static var productsDirectory: URL {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return executable.deletingLastPathComponent()
    }

    /// The built `urlloading-test-helper`.
    public static var helper: URL { productsDirectory.appendingPathComponent("urlloading-test-helper") }

    /// How long a child may run before it is killed (every wait on a child
    /// has a bound; a hung child ends the test instead of hanging it).
    public static var lifetime: TimeInterval { TimeInterval(300 * Sanitizer.timeScale) }

    /// Starts `executable` with `arguments`; output goes to temporary files.
    public static func start(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil
    ) throws -> Running {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let environment { process.environment = environment }
        let directory = FileManager.default.temporaryDirectory
        let out = directory.appendingPathComponent("child-\(UUID().uuidString).out")
        let err = directory.appendingPathComponent("child-\(UUID().uuidString).err")
        guard FileManager.default.createFile(atPath: out.path, contents: nil),
            FileManager.default.createFile(atPath: err.path, contents: nil)
        else {
            throw TestOriginError(message: "cannot create output files in \(directory.path)")
        }
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        process.standardInput = FileHandle.nullDevice
        let running = Running(process: process, outputPath: out, errorPath: err, outputPipe: nil)
        try running.launch()
        return running
    }

    /// Starts `executable` with its standard output on a pipe, readable
    /// line by line with `Running.nextLine()`.
    public static func startWithOutputLines(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil) throws -> Running {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let environment { process.environment = environment }
        let pipe = Pipe()
        process.standardOutput = pipe
        let err = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString).err")
        guard FileManager.default.createFile(atPath: err.path, contents: nil) else {
            throw TestOriginError(message: "cannot create \(err.path)")
        }
        process.standardError = try FileHandle(forWritingTo: err)
        process.standardInput = FileHandle.nullDevice
        let running = Running(process: process, outputPath: nil, errorPath: err, outputPipe: pipe)
        try running.launch()
        return running
    }

    /// Runs `executable` to the end.
    public static func run(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil
    ) async throws -> Result {
        try await start(executable, arguments, environment: environment).wait()
    }

    /// A child that was started.
    public final class Running: @unchecked Sendable {
        // Process is not Sendable; this class only reads it after it ran, and
        // `wait` is the one place that blocks on it.
        private let process: Process
        let outputPath: URL?
        let errorPath: URL
        private let lines: AsyncStream<String>?
        /// Signalled once when the child ended (Process's own wait spins
        /// its run loop on Linux: a busy core for as long as the child runs).
        private let ended = DispatchGroup()

        init(process: Process, outputPath: URL?, errorPath: URL, outputPipe: Pipe?) {
            self.process = process
            self.outputPath = outputPath
            self.errorPath = errorPath
            let ended = self.ended
            ended.enter()
            process.terminationHandler = { _ in ended.leave() }
            if let outputPipe {
                let (stream, continuation) = AsyncStream.makeStream(of: String.self)
                let handle = outputPipe.fileHandleForReading
                // A thread of its own: reading a pipe blocks.
                Thread.detachNewThread {
                    var pending = Data()
                    while true {
                        let chunk = handle.availableData
                        if chunk.isEmpty { break }
                        pending.append(chunk)
                        while let newline = pending.firstIndex(of: 0x0A) {
                            continuation.yield(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                            pending = Data(pending[(newline + 1)...])
                        }
                    }
                    continuation.finish()
                }
                self.lines = stream
            } else {
                self.lines = nil
            }
        }

        /// Runs the child, and kills it (SIGKILL) if it still runs after
        /// `ChildProcess.lifetime`.
        func launch() throws {
            try process.run()
            let pid = process.processIdentifier
            let ended = self.ended
            Thread.detachNewThread {
                if ended.wait(timeout: .now() + ChildProcess.lifetime) == .timedOut { _ = Foundation.kill(pid, SIGKILL) }
            }
        }

        /// The next line of standard output (for children started with
        /// `startWithOutputLines`), or nil at its end.
        public func nextLine() async -> String? {
            guard let lines else { return nil }
            var iterator = lines.makeAsyncIterator()
            return await iterator.next()
        }

        /// The child's process id.
        public var pid: Int32 { process.processIdentifier }

        /// Sends `signal` to the child.
        public func kill(_ signal: Int32) {
            _ = Foundation.kill(process.processIdentifier, signal)
        }

        /// Waits for the child to end, off the cooperative thread pool.
        public func wait() async throws -> Result {
            let process = self.process
            let ended = self.ended
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Thread.detachNewThread {
                    // Bounded by the lifetime kill in `launch()`.
                    ended.wait()
                    continuation.resume()
                }
            }
            defer {
                if let outputPath { try? FileManager.default.removeItem(at: outputPath) }
                try? FileManager.default.removeItem(at: errorPath)
            }
            let signalled = process.terminationReason == .uncaughtSignal
            return Result(
                status: signalled ? 128 + process.terminationStatus : process.terminationStatus,
                signalled: signalled,
                standardOutput: outputPath.flatMap { try? String(contentsOf: $0, encoding: .utf8) } ?? "",
                standardError: (try? String(contentsOf: errorPath, encoding: .utf8)) ?? "")
        }
    }
}

/// The sanitizer the suite runs under (`tools/test --sanitize=...`), if any.
public enum Sanitizer {
    /// "address" or "thread", from `$URLLOADING_SANITIZER`; nil without one.
    public static var active: String? { ProcessInfo.processInfo.environment["URLLOADING_SANITIZER"] }

    /// A memory bound in KiB, widened under a sanitizer: its shadow memory
    /// and redzones grow every process's resident set several times over.
    public static func memoryBound(kilobytes: Int) -> Int {
        active == nil ? kilobytes : kilobytes * 4 + 128 * 1024
    }

    /// How many times longer a bound on waiting is under the sanitizer:
    /// ThreadSanitizer makes every memory access a call, and the whole suite
    /// runs at once on two cores. Bounds only: nothing waits longer for it.
    public static var timeScale: Int {
        switch active {
        case "thread": 5
        case "address": 2
        default: 1
        }
    }

    /// A test's time limit in minutes, widened under a sanitizer.
    public static func minutes(_ minutes: Int) -> Int { minutes * timeScale }
}
