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
    /// - Returns: The lock's descriptor (kept open for the process's life),
    ///   or nil when another `transferd` holds it.
    package static func acquireInstanceLock(_ paths: BackgroundPaths) throws -> Int32? {
        try paths.prepareRuntime()
        let fd = open(paths.lockFile, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw BackgroundWireError("cannot open \(paths.lockFile): \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            return nil
        }
        _ = ftruncate(fd, 0)
        let pid = Array("\(getpid())\n".utf8)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return fd
    }

    /// The listening socket systemd passed (socket activation), if any.
    package static func activatedListener(environment: [String: String] = ProcessInfo.processInfo.environment) -> UnixSocket? {
        guard let pid = environment["LISTEN_PID"].flatMap({ Int32($0) }), pid == getpid(),
            let count = environment["LISTEN_FDS"].flatMap({ Int($0) }), count >= 1
        else { return nil }
        return UnixSocket(descriptor: 3)
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
                        guard let message = try client.socket.receive(&framing) else { break }
                        // An upload's body descriptor came with (or before) its frame.
                        var passed: Int32?
                        if case .create(let spec) = message, spec.bodyPassed == true { passed = framing.takeDescriptor() }
                        let body = passed
                        owner.async { self.handle(message, body: body, from: client) }
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
    /// the app hears: an app that is attaching gets `attached` first.
    func reportProgress(_ running: RunningTransfer, bytes: Int64, expected: Int64) {
        owner.async { [self] in
            guard let record = state.withLock({ $0.records[running.id] }), let client = client(of: record.session) else { return }
            let upload = running.kind == .upload
            send(
                .progress(
                    task: record.spec.task, sent: upload ? bytes : 0, written: upload ? 0 : bytes, expectedToSend: upload ? expected : 0,
                    expectedToWrite: upload ? 0 : expected), to: client)
        }
    }
}
