import ArgumentParser
import Foundation
import TransferDaemon
import URLLoading

/// `cachetool transfers`: the background sessions' tasks that transferd
/// carries out for this user. `list` and `show` read transferd's
/// journal read-only (SQLite's WAL lets them read while transferd writes);
/// `cancel` and `retry` ask the running transferd. No request secret is
/// ever printed: Authorization, Cookie and similar values, a URL's
/// password and query values are redacted.
struct Transfers: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Background transfers: list, show, cancel, retry (transferd's journal; no secret is printed).",
        subcommands: [ListTransfers.self, ShowTransfer.self, CancelTransfer.self, RetryTransfer.self])

    /// The user's transferd journal (running downloads with their bytes on
    /// disk now), or exit 3 when transferd never kept one.
    static func records() throws -> [TransferRecord] {
        let path = BackgroundPaths().journal
        guard FileManager.default.fileExists(atPath: path) else {
            FileHandle.standardError.write(Data("cachetool: no transfer journal at \(path) (transferd has not run for this user)\n".utf8))
            throw ExitCode(ExitStatus.notFound)
        }
        do {
            return TransferListing.live(try Journal(path: path, writer: false).records(delivered: true), paths: BackgroundPaths())
        } catch {
            FileHandle.standardError.write(Data("cachetool: cannot read the transfer journal: \(error)\n".utf8))
            throw ExitCode(ExitStatus.failure)
        }
    }

    /// Sends `message` to the running transferd and prints its answer.
    static func ask(_ message: BackgroundMessage) throws {
        let path = BackgroundPaths().socket
        let answer: BackgroundMessage?
        do {
            let socket = try UnixSocket.connect(path: path)
            try socket.send(message)
            var framing = BackgroundFraming()
            answer = try socket.receive(&framing)
        } catch {
            FileHandle.standardError.write(Data("cachetool: transferd does not answer at \(path): \(error)\n".utf8))
            throw ExitCode(ExitStatus.failure)
        }
        guard case .done(let ok, let text)? = answer else {
            FileHandle.standardError.write(Data("cachetool: transferd gave no answer\n".utf8))
            throw ExitCode(ExitStatus.failure)
        }
        guard ok else {
            FileHandle.standardError.write(Data("cachetool: \(text)\n".utf8))
            throw ExitCode(ExitStatus.notFound)
        }
        print(text)
    }
}

struct ListTransfers: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "Every task: queued, running, retrying, finished and waiting for delivery, delivered; bytes, attempts, the last error.")
    @Option(help: "Only this session identifier.") var session: String?
    @Flag(help: "Print JSON instead of text.") var json = false

    func run() throws {
        let records = try Transfers.records().filter { session == nil || $0.session == session }
        if json {
            print(try TransferListing.json(records))
        } else {
            print(TransferListing.table(records), terminator: "")
        }
    }
}

struct ShowTransfer: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "One task, with its redacted request.")
    @Argument(help: "The session identifier.") var session: String
    @Argument(help: "The task identifier.") var task: Int
    @Flag(help: "Print JSON instead of text.") var json = false

    func run() throws {
        guard let record = try Transfers.records().first(where: { $0.session == session && $0.spec.task == task }) else {
            FileHandle.standardError.write(Data("cachetool: no task \(task) in session \(session)\n".utf8))
            throw ExitCode(ExitStatus.notFound)
        }
        print(json ? try TransferListing.json([record]) : TransferListing.details(record))
    }
}

/// The task a command acts on: its session identifier and number.
struct TaskReference: ParsableArguments {
    @Argument(help: "The session identifier.") var session: String
    @Argument(help: "The task identifier.") var task: Int

    func validate() throws {
        guard (1...Int(Int32.max)).contains(task) else { throw ValidationError("the task identifier must be between 1 and \(Int32.max)") }
    }
}

struct CancelTransfer: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel", abstract: "Cancel a task: its app hears didCompleteWithError with URLError.cancelled.")
    @OptionGroup var reference: TaskReference

    func run() throws { try Transfers.ask(.cancelTransfer(session: reference.session, task: reference.task)) }
}

struct RetryTransfer: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retry", abstract: "Have a task that waits to retry (after a failure) go now instead of at its retry time.")
    @OptionGroup var reference: TaskReference

    func run() throws { try Transfers.ask(.retryTransfer(session: reference.session, task: reference.task)) }
}
