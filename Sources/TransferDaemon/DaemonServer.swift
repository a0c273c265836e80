import Dispatch
package import Foundation
#if canImport(Glibc)
import Glibc
#endif
package import URLLoading

/// transferd's socket: one per user, in a 0700 folder; each connection is
/// checked to come from this user, then read on a thread of its own.
extension Daemon {
    /// Takes the per-user instance lock (`flock` on the runtime folder's
    /// lock file, which then names this process).
    ///
    /// The holder may not listen: it may be starting still, or dying (a
    /// transferd that was just killed can hold the lock a while after it
    /// looks dead: its first thread is a zombie while another finishes a
    /// write to disk, and the descriptors close only after the last). So
    /// when the lock is held and nothing listens on the socket, this waits
    /// (up to `patience`) for one or the other, instead of leaving the app
    /// that started it with no transferd at all.
    ///
    /// - Returns: The lock's descriptor (kept open for the process's life),
    ///   or nil when another `transferd` holds it and listens.
    /// - Throws: When the lock stays held for `patience` and nothing listens.
    package static func acquireInstanceLock(_ paths: BackgroundPaths, patience: Duration = .seconds(8)) throws -> Int32? {
        try paths.prepareRuntime()
        let fd = open(paths.lockFile, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw BackgroundWireError("cannot open \(paths.lockFile): \(String(cString: strerror(errno)))") }
        let deadline = ContinuousClock.now + patience
        var said = false
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            // A dying holder's socket can still take connections it will never answer.
            if !holderIsDying(fd), let serving = try? UnixSocket.connect(path: paths.socket) {
                serving.close()
                close(fd)
                return nil
            }
            guard ContinuousClock.now < deadline else {
                let error = BackgroundWireError("the instance lock \(paths.lockFile) is held\(holder(fd)), but nothing listens on \(paths.socket)")
                close(fd)
                throw error
            }
            if !said {
                said = true
                // Standard error is transferd's log.
                FileHandle.standardError.write(
                    Data("transferd \(getpid()): the instance lock is held\(holder(fd)) and nothing listens yet: waiting\n".utf8))
            }
            usleep(10_000)
        }
        _ = ftruncate(fd, 0)
        let pid = Array("\(getpid())\n".utf8)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return fd
    }

    /// The process the lock file names (its holder writes it once it has the lock).
    private static func holderID(_ fd: Int32) -> pid_t? {
        var bytes = [UInt8](repeating: 0, count: 16)
        let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0, count < bytes.count,
            let pid = pid_t(String(decoding: bytes[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)), pid > 0
        else { return nil }
        return pid
    }

    /// " by process N", for a message.
    private static func holder(_ fd: Int32) -> String {
        holderID(fd).map { " by process \($0)" } ?? ""
    }

    /// Whether the named holder is gone or a zombie (whose other threads may
    /// still hold its descriptors while they end).
    private static func holderIsDying(_ fd: Int32) -> Bool {
        guard let pid = holderID(fd) else { return false }
        if kill(pid, 0) != 0 && errno == ESRCH { return true }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
        // The state follows the command's closing parenthesis.
        guard let close = stat.lastIndex(of: ")") else { return false }
        return stat[close...].dropFirst(2).first == "Z"
    }

    /// The listening socket systemd passed (socket activation, the
    /// `sd_listen_fds` protocol read without libsystemd): with `LISTEN_PID`
    /// naming this process and `LISTEN_FDS` at least 1, descriptor 3, if it
    /// is a listening Unix stream socket. The variables are removed (a
    /// launched command must not take them for its own) and the descriptor
    /// closes on exec. Nil without activation, or when descriptor 3 is not
    /// such a socket (said on standard error, transferd's log; it then binds its own).
    package static func activatedListener(environment: [String: String] = ProcessInfo.processInfo.environment) -> UnixSocket? {
        guard let pidText = environment["LISTEN_PID"], let countText = environment["LISTEN_FDS"] else { return nil }
        for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { unsetenv(name) }
        guard pidText.utf8.count <= 10, let pid = Int32(pidText), pid == getpid(), countText.utf8.count <= 4, let count = Int(countText), count >= 1 else {
            return nil
        }
        let descriptor: Int32 = 3
        guard isListeningUnixStream(descriptor) else {
            // Standard error is transferd's log.
            FileHandle.standardError.write(Data("transferd: LISTEN_FDS names descriptor 3, which is not a listening Unix stream socket: ignored\n".utf8))
            return nil
        }
        _ = fcntl(descriptor, F_SETFD, fcntl(descriptor, F_GETFD) | FD_CLOEXEC)
        return UnixSocket(descriptor: descriptor)
    }

    /// Whether `descriptor` is a Unix stream socket that listens.
    package static func isListeningUnixStream(_ descriptor: Int32) -> Bool {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_ACCEPTCONN, &value, &length) == 0, value != 0 else { return false }
        length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_TYPE, &value, &length) == 0, value == Int32(SOCK_STREAM.rawValue) else { return false }
        var address = sockaddr_storage()
        var size = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &size) }
        }
        return named == 0 && address.ss_family == sa_family_t(AF_UNIX)
    }

    /// Serves clients until the process ends; with `idleExit`, exits once
    /// no client is attached, no task is unfinished or undelivered, and
    /// nothing happened for that long.
    package func serve(_ listener: UnixSocket, idleExit: TimeInterval?) -> Never {
        if let idleExit { scheduleIdleCheck(idleExit) }
        while true {
            guard let connection = listener.accept() else {
                logger.error("the listening socket failed: \(String(cString: strerror(errno)))")
                exit(1)
            }
            guard connection.peerUserID == getuid() else {
                // Another user (or one the kernel cannot name): not served.
                logger.warning("refused a connection from uid \(connection.peerUserID.map { "\($0)" } ?? "unknown")")
                connection.close()
                continue
            }
            let client = Client(socket: connection)
            Thread.detachNewThread { [self] in
                var framing = BackgroundFraming()
                while true {
                    do {
                        guard var message = try client.socket.receive(&framing) else { break }
                        // Messages that arrived together make one turn: their
                        // changes are written in one transaction.
                        var batch: [(BackgroundMessage, Int32?)] = []
                        var failure: (any Error)?
                        while true {
                            // An upload's body descriptor came with (or before) its frame.
                            var passed: Int32?
                            if case .create(let spec) = message, spec.bodyPassed == true { passed = framing.takeDescriptor() }
                            batch.append((message, passed))
                            guard batch.count < Self.turnLimit else { break }
                            do {
                                guard let next = try framing.next() else { break }
                                message = next
                            } catch {
                                // The messages before a bad frame are still served.
                                failure = error
                                break
                            }
                        }
                        owner.async { [batch] in
                            self.turn {
                                self.handle(batch.map { (message: $0.0, body: $0.1) }, from: client)
                            }
                        }
                        if let failure { throw failure }
                    } catch {
                        logger.warning("a client sent something that is not a message: \(error)")
                        break
                    }
                }
                framing.closeDescriptors()
                owner.async { self.detach(client) }
            }
        }
    }

    /// At most this many of a client's messages make one turn.
    static let turnLimit = 256

    private func scheduleIdleCheck(_ idleExit: TimeInterval) {
        owner.asyncAfter(deadline: .now() + min(idleExit, 10)) { [self] in
            let idle = state.withLock { state in
                state.clients.isEmpty && state.records.values.allSatisfy(\.machine.isFinished)
                    && Date().timeIntervalSince(state.lastActivity) >= idleExit
            }
            if idle {
                logger.info("transferd idle for \(Int(idleExit)) s: exiting")
                exit(0)
            }
            scheduleIdleCheck(idleExit)
        }
    }

    /// Tells the attached app how far a transfer got (called on the
    /// transfer's context). Sent from `owner`, in order with everything else
    /// the app hears: an app that is attaching gets `attached` first. A
    /// download's `final` report goes with its `finished` to an app of
    /// revision 2 or later, not in a message of its own.
    func reportProgress(_ running: RunningTransfer, bytes: Int64, expected: Int64, final: Bool = false) {
        fromTransfer { [self] in
            guard let record = state.withLock({ $0.records[running.id] }), let client = client(of: record.session) else { return }
            let upload = running.kind == .upload
            if final, !upload, client.revision.withLock({ $0 >= 2 }) { return }
            send(
                .progress(
                    task: record.spec.task, sent: upload ? bytes : 0, written: upload ? 0 : bytes, expectedToSend: upload ? expected : 0,
                    expectedToWrite: upload ? 0 : expected), to: client)
        }
    }
}
