import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import TransferDaemon
import URLLoading

/// transferd: carries out the background sessions' transfers of one user.
/// Apps start it on demand; `systemd --user` can start it on
/// its socket instead (the DocC article "Background sessions").
@main
struct TransferdCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transferd",
        abstract: "Carries out background sessions' transfers for this user, from a journal that survives any crash.",
        subcommands: [Serve.self, List.self, Show.self, Cancel.self],
        defaultSubcommand: Serve.self)
}

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serve background sessions on the user's socket (the default).")

    @Option(help: "A descriptor to write one byte to once the socket listens (used by the library when it starts transferd).")
    var readyFd: Int32?

    @Option(help: "Exit after this many seconds with nothing to do (0: never).")
    var idleExit: Double = 300

    func run() throws {
        signal(SIGPIPE, SIG_IGN)
        let paths = BackgroundPaths()
        let activated = Daemon.activatedListener()
        guard let lock = try Daemon.acquireInstanceLock(paths) else {
            // Another transferd serves this user: the caller connects to it.
            signalReady()
            return
        }
        _ = lock
        // Before the journal's open, which is what can take long: a log that
        // ends here says where a start that never served stopped.
        FileHandle.standardError.write(Data("transferd \(getpid()) starting: opening the journal \(paths.journal)\n".utf8))
        let listener = try activated ?? UnixSocket.listen(path: paths.socket)
        let daemon = try Daemon(paths: paths, settings: Daemon.Settings(environment: ProcessInfo.processInfo.environment))
        let how = activated != nil ? " (socket activation)" : ""
        FileHandle.standardError.write(Data("transferd \(getpid()) serving \(paths.socket)\(how), journal \(paths.journal)\n".utf8))
        signalReady()
        let limit: Double? = idleExit.isFinite && idleExit > 0 ? min(idleExit, 86_400 * 365) : nil
        daemon.serve(listener, idleExit: limit)
    }

    private func signalReady() {
        guard let readyFd, readyFd > 2 else { return }
        var byte: UInt8 = 1
        _ = write(readyFd, &byte, 1)
        close(readyFd)
    }
}

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the background tasks: queued, running, finished and waiting for delivery, delivered.")

    @Flag(help: "JSON, one object per task.")
    var json = false

    @Option(help: "Only this session identifier.")
    var session: String?

    func run() throws {
        let paths = BackgroundPaths()
        let records = TransferListing.live(try Journal(path: paths.journal, writer: false).records(delivered: true), paths: paths)
            .filter { session == nil || $0.session == session }
        if json {
            print(try TransferListing.json(records))
        } else {
            print(TransferListing.table(records), terminator: "")
        }
    }
}

struct Show: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show one task (its request's secrets are never shown).")

    @Argument(help: "The session identifier.")
    var session: String
    @Argument(help: "The task identifier.")
    var task: Int
    @Flag(help: "JSON.")
    var json = false

    func run() throws {
        guard let record = try Journal(path: BackgroundPaths().journal, writer: false).records(delivered: true).first(where: { $0.session == session && $0.spec.task == task })
        else { throw ValidationError("no task \(task) in session \(session)") }
        print(json ? try TransferListing.json([record]) : TransferListing.details(record))
    }
}

struct Cancel: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Cancel a task (its app hears didCompleteWithError: cancelled).")

    @Argument(help: "The session identifier.")
    var session: String
    @Argument(help: "The task identifier.")
    var task: Int

    func run() throws {
        let socket = try UnixSocket.connect(path: BackgroundPaths().socket)
        try socket.send(.cancelTransfer(session: session, task: task))
        var framing = BackgroundFraming()
        guard case .done(let ok, let message)? = try socket.receive(&framing) else { throw ValidationError("transferd did not answer") }
        guard ok else { throw ValidationError(message) }
        print(message)
    }
}
