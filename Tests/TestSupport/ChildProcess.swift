public import Foundation
import Locking

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
        let directory = FileManager.default.temporaryDirectory
        let out = directory.appendingPathComponent("child-\(UUID().uuidString).out")
        let err = directory.appendingPathComponent("child-\(UUID().uuidString).err")
        let output = try Spawn.create(out.path)
        defer { close(output) }
        let errors = try Spawn.create(err.path)
        defer { close(errors) }
        let pid = try Spawn.run(executable.path, arguments, environment: environment, output: output, errors: errors)
        return Running(pid: pid, outputPath: out, errorPath: err, outputPipe: nil)
    }

    /// Starts `executable` with its standard output on a pipe, readable
    /// line by line with `Running.nextLine()`.
    public static func startWithOutputLines(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil) throws -> Running {
        let err = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString).err")
        let errors = try Spawn.create(err.path)
        defer { close(errors) }
        var ends: [Int32] = [-1, -1]
        guard Spawn.pipeClosedOnExec(&ends) == 0 else { throw TestOriginError(message: "no pipe: \(String(cString: strerror(errno)))") }
        defer { close(ends[1]) }
        let pid: pid_t
        do {
            pid = try Spawn.run(executable.path, arguments, environment: environment, output: ends[1], errors: errors)
        } catch {
            close(ends[0])
            throw error
        }
        return Running(pid: pid, outputPath: nil, errorPath: err, outputPipe: FileHandle(fileDescriptor: ends[0], closeOnDealloc: true))
    }

    /// Runs `executable` to the end.
    public static func run(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil
    ) async throws -> Result {
        try await start(executable, arguments, environment: environment).wait()
    }

    /// `posix_spawn`, not Foundation's `Process`: its `run()` on Linux reads
    /// past a buffer while it lists `/proc/self/fd` and crashes the test
    /// process now and then (swift-corelibs-foundation pull request 5472,
    /// not in this toolchain).
    enum Spawn {
        // glibc has both; Swift's Glibc module shows neither (they need _GNU_SOURCE).
        private static let closeFrom = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
            unsafeBitCast($0, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
        }
        private static let pipe2 = dlsym(nil, "pipe2").map { unsafeBitCast($0, to: (@convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32).self) }

        /// A pipe whose ends close on exec, made so at once (no other child started meanwhile inherits them).
        static func pipeClosedOnExec(_ ends: inout [Int32]) -> Int32 {
            guard let pipe2 else { return -1 }
            return ends.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.map { pipe2($0, O_CLOEXEC) } ?? -1 }
        }

        /// A new output file, 0600, closed on exec (the child gets a copy).
        static func create(_ path: String) throws -> Int32 {
            let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw TestOriginError(message: "cannot create \(path): \(String(cString: strerror(errno)))") }
            return descriptor
        }

        /// Starts the child with standard input from /dev/null, standard
        /// output and error on the descriptors given, and no other
        /// descriptor of this process.
        static func run(_ path: String, _ arguments: [String], environment: [String: String]?, output: Int32, errors: Int32) throws -> pid_t {
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_adddup2(&actions, output, 1)
            posix_spawn_file_actions_adddup2(&actions, errors, 2)
            _ = closeFrom?(&actions, 3)
            let argv = ([path] + arguments).map { strdup($0) } + [nil]
            defer { argv.forEach { free($0) } }
            let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
            defer { envp?.forEach { free($0) } }
            var pid: pid_t = 0
            let status = envp.map { posix_spawn(&pid, path, &actions, nil, argv, $0) } ?? posix_spawn(&pid, path, &actions, nil, argv, environ)
            guard status == 0 else { throw TestOriginError(message: "cannot start \(path): \(String(cString: strerror(status)))") }
            return pid
        }
    }

    /// A child that was started.
    public final class Running: @unchecked Sendable {
        /// The child's process id.
        public let pid: Int32
        let outputPath: URL?
        let errorPath: URL
        private let lines: AsyncStream<String>?
        /// Signalled once when the child ended and was reaped.
        private let ended = DispatchGroup()
        /// `waitpid`'s status, once `ended` (written by the reaping thread).
        private let status = Lock<Int32>(0)

        init(pid: Int32, outputPath: URL?, errorPath: URL, outputPipe: FileHandle?) {
            self.pid = pid
            self.outputPath = outputPath
            self.errorPath = errorPath
            let ended = self.ended
            ended.enter()
            if let handle = outputPipe {
                let (stream, continuation) = AsyncStream.makeStream(of: String.self)
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
            // Reaps the child; kills it (SIGKILL) if it still runs after `ChildProcess.lifetime`.
            Thread.detachNewThread { [self] in
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0, errno == EINTR {}
                self.status.withLock { $0 = status }
                ended.leave()
            }
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

        /// Sends `signal` to the child.
        public func kill(_ signal: Int32) {
            _ = Foundation.kill(pid, signal)
        }

        /// Waits for the child to end, off the cooperative thread pool.
        public func wait() async throws -> Result {
            let ended = self.ended
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Thread.detachNewThread {
                    // Bounded by the lifetime kill.
                    ended.wait()
                    continuation.resume()
                }
            }
            return result()
        }

        /// Blocks the calling thread until the child ended (bounded by the
        /// lifetime kill): for set-up code that is not async.
        public func waitBlocking() -> Result {
            ended.wait()
            return result()
        }

        private func result() -> Result {
            defer {
                if let outputPath { try? FileManager.default.removeItem(at: outputPath) }
                try? FileManager.default.removeItem(at: errorPath)
            }
            // `waitpid`'s status: the low 7 bits are the signal that ended the child, else the exit code is above.
            let status = self.status.withLock { $0 }
            let signal = status & 0x7F
            let signalled = signal != 0
            return Result(
                status: signalled ? 128 + signal : (status >> 8) & 0xFF,
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
