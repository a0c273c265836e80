package import Foundation
import Locking
package import Logging
import Migrations
import Storage
package import URLLoading

/// One background task as the journal keeps it.
package struct TransferRecord: Sendable, Equatable {
    /// The journal's row id: names the task's files.
    package var id: Int64
    package var session: String
    package var spec: TaskSpec
    package var machine: BackgroundTransferMachine
    /// Suspended by the app (`suspend()`); a new task is suspended until resumed.
    package var suspended: Bool
    /// The whole body's expected length, -1 unknown.
    package var expected: Int64 = -1
    package var response: ResponseSpec?
    package var responseBody: Data?
    /// An upload's resume data, once its server named a resumption URL.
    package var uploadResume: Data?
    package var errorCode: String?
    package var errorMessage: String?
    package var created: Date
    package var finished: Date?

    package init(id: Int64, session: String, spec: TaskSpec, machine: BackgroundTransferMachine, suspended: Bool, created: Date) {
        self.id = id
        self.session = session
        self.spec = spec
        self.machine = machine
        self.suspended = suspended
        self.created = created
    }

    /// The phase's name as the journal and listings give it.
    package var phaseName: String {
        switch machine.phase {
        case .waitingForBeginDate: "waiting"
        case .askingToBegin: "asking"
        case .queued: "queued"
        case .running: "running"
        case .retrying: "retrying"
        case .finished: "finished"
        case .delivered: "delivered"
        }
    }
}

/// transferd's journal (SQLite, `Migrations/0001_transfers_create.sql`):
/// each change of a task is written here before transferd acts on it.
package final class Journal: Sendable {
    let database: Database
    /// Seals secrets before they are written; nil for a reader without the key.
    let seal: JournalSeal?
    let logger: Logger
    /// What was last written of each task's rarely changing parts: a save
    /// that changes only the phase, the counts or the outcome neither
    /// encodes nor seals them again, nor writes them.
    private let written = Lock<[Int64: Written]>([:])

    private struct Written: Equatable {
        var spec: TaskSpec
        var response: ResponseSpec?
        var responseBody: Data?
        var uploadResume: Data?

        init(_ record: TransferRecord) {
            (spec, response, responseBody, uploadResume) = (record.spec, record.response, record.responseBody, record.uploadResume)
        }
    }

    /// Opens or creates the journal at `path` (0600 in a 0700 folder) and
    /// its key (`Journal.key` beside it; made when `writer` and missing).
    ///
    /// - Parameter writer: transferd itself; a tool that only reads passes
    ///   false and shows sealed values as such when the key cannot be read.
    package init(path: String, writer: Bool = true, logger: Logger = Logger(label: "urlloading.transferd")) throws {
        self.logger = logger
        let keyPath = (path as NSString).deletingLastPathComponent + "/Journal.key"
        if writer {
            seal = try JournalSeal(keyPath: keyPath, create: true)
        } else {
            seal = try? JournalSeal(keyPath: keyPath, create: false)
        }
        // Tasks cannot be made again by anybody but their app: a damaged
        // file is kept for inspection, and a new one started.
        database = try Database(path: path, migrations: Schema.transfers, options: .privateStore(logger: logger))
    }

    private static let columns =
        "id, session, task, spec, phase, phase_date, outcome, suspended, attempts, bytes, expected, validator, response, response_body, error_code, error_message, created, finished, upload_resume"

    /// Every task, delivered ones included when `delivered`.
    package func records(delivered: Bool = false) throws -> [TransferRecord] {
        try database.read { (connection: Connection) throws(SQLiteError) in
            try connection.query(
                "SELECT \(Self.columns) FROM transfers \(delivered ? "" : "WHERE phase <> 'delivered'") ORDER BY session, task"
            ) { row in
                record(row)
            }.compactMap { $0 }
        }
    }

    /// A row as a record, its secrets unsealed; nil (and skipped) when its spec cannot be read.
    private func record(_ row: Statement) -> TransferRecord? {
        guard let specText = row.text(3), var spec = try? JSONDecoder().decode(TaskSpec.self, from: Data(specText.utf8)) else { return nil }
        var lost: [String] = []
        if let seal { spec = seal.unsealed(spec, lost: &lost) }
        let date = row.isNull(5) ? nil : Date(timeIntervalSince1970: row.double(5))
        let attempts = Int(clamping: row.int64(8))
        let phase: BackgroundTransferMachine.Phase
        switch row.text(4) ?? "" {
        case "waiting": phase = .waitingForBeginDate(date ?? Date())
        case "asking": phase = .askingToBegin
        case "running": phase = .running(attempt: max(1, attempts))
        case "retrying": phase = .retrying(attempt: max(1, attempts), at: date ?? Date())
        case "finished", "delivered":
            let outcome: BackgroundTransferMachine.Outcome
            switch row.text(6) ?? "" {
            case "succeeded": outcome = .succeeded(status: 0)
            case "cancelled": outcome = .cancelled
            default: outcome = .failed(reason: row.text(15) ?? "failed")
            }
            phase = row.text(4) == "delivered" ? .delivered : .finished(outcome)
        default: phase = .queued
        }
        let machine = BackgroundTransferMachine(phase: phase, bytes: row.int64(9), validator: row.text(11), attempts: attempts)
        var record = TransferRecord(
            id: row.int64(0), session: row.text(1) ?? "", spec: spec, machine: machine, suspended: row.int64(7) != 0,
            created: Date(timeIntervalSince1970: row.double(16)))
        record.expected = row.int64(10)
        record.response = row.text(12).flatMap { try? JSONDecoder().decode(ResponseSpec.self, from: Data($0.utf8)) }
        if let seal, let response = record.response { record.response = seal.unsealed(response, lost: &lost) }
        if !lost.isEmpty, seal != nil {
            // The key was replaced or lost: the request goes on without what it cannot read.
            logger.warning("task \(spec.task) of \(record.session): cannot unseal \(lost.joined(separator: ", ")); left out")
        }
        record.responseBody = row.data(13)
        record.errorCode = row.text(14)
        record.errorMessage = row.text(15)
        record.finished = row.isNull(17) ? nil : Date(timeIntervalSince1970: row.double(17))
        record.uploadResume = row.data(18).flatMap { unsealedUploadResume($0, task: spec.task, session: record.session) }
        return record
    }

    /// Adds a new task; its session's next task identifier moves past it.
    ///
    /// - Returns: The record with its row id.
    package func insert(_ record: TransferRecord) throws -> TransferRecord {
        // Sealed and encoded before the transaction: inside it only SQLite can fail.
        var values = try columns(of: record)
        let inserted = try database.write { (connection: Connection) throws(SQLiteError) in
            var saved = record
            saved.id = try Self.insert(record, values: &values, connection)
            return saved
        }
        written.withLock { $0[inserted.id] = Written(inserted) }
        return inserted
    }

    /// Adds new tasks in one transaction, all or none (a batch of an app's
    /// `create` messages).
    ///
    /// - Returns: The records with their row ids, in order.
    package func insert(_ records: [TransferRecord]) throws -> [TransferRecord] {
        guard records.count > 1 else { return try records.map { try insert($0) } }
        // Sealed and encoded before the transaction: inside it only SQLite can fail.
        let values = try records.map { try columns(of: $0) }
        let inserted = try database.write { (connection: Connection) throws(SQLiteError) in
            var saved: [TransferRecord] = []
            saved.reserveCapacity(records.count)
            for (record, var values) in zip(records, values) {
                var kept = record
                kept.id = try Self.insert(record, values: &values, connection)
                saved.append(kept)
            }
            return saved
        }
        written.withLock { written in
            for record in inserted { written[record.id] = Written(record) }
        }
        return inserted
    }

    /// One new task's rows, in the caller's transaction: its row id.
    private static func insert(_ record: TransferRecord, values: inout [SQLiteValue], _ connection: Connection) throws(SQLiteError) -> Int64 {
        try connection.run(
            """
            INSERT INTO sessions(identifier, next_task) VALUES (?, ?)
            ON CONFLICT(identifier) DO UPDATE SET next_task = max(next_task, excluded.next_task)
            """, [.text(record.session), .integer(Int64(record.spec.task) + 1)])
        try connection.run(
            "INSERT INTO transfers(session, task, spec, phase, created) VALUES (?, ?, ?, 'queued', ?)",
            [.text(record.session), .integer(Int64(record.spec.task)), values[0], .real(record.created.timeIntervalSince1970)])
        let id = connection.lastInsertRowID
        values[values.count - 1] = .integer(id)
        try connection.run(updateSQL, values)
        return id
    }

    /// Writes a record's current state.
    package func save(_ record: TransferRecord) throws {
        try save([record])
    }

    /// Writes records' current states in one transaction: all or none.
    /// A record whose spec, response and resume data are as last written
    /// writes only its state.
    package func save(_ records: [TransferRecord]) throws {
        guard !records.isEmpty else { return }
        // Encoded and sealed before the transaction: inside it only SQLite can fail.
        var rows: [(part: Part, values: [SQLiteValue])] = []
        rows.reserveCapacity(records.count)
        let parts = written.withLock { written in records.map { Part(written: written[$0.id], now: $0) } }
        for (record, part) in zip(records, parts) {
            rows.append((part, try columns(of: record, part)))
        }
        try database.write { (connection: Connection) throws(SQLiteError) in
            for row in rows { try connection.run(row.part.sql, row.values) }
        }
        written.withLock { written in
            // A delivered task changes no more: what was written of it is forgotten.
            for record in records { written[record.id] = record.machine.phase == .delivered ? nil : Written(record) }
        }
    }

    /// What a save writes of a record, by what changed since it was last written.
    private enum Part {
        /// Only the state (phase, counts, outcome).
        case state
        /// The state, the response and the resume data; the spec as written.
        case details
        /// Everything, the spec too.
        case whole

        init(written: Written?, now record: TransferRecord) {
            guard let written else {
                self = .whole
                return
            }
            if written.spec != record.spec {
                self = .whole
            } else if written == Written(record) {
                self = .state
            } else {
                self = .details
            }
        }

        var sql: String {
            switch self {
            case .state: Journal.stateSQL
            case .details: Journal.detailsSQL
            case .whole: Journal.updateSQL
            }
        }
    }

    /// `updateSQL` without the parts `Written` holds.
    private static let stateSQL = """
        UPDATE transfers SET phase = ?, phase_date = ?, outcome = coalesce(?, outcome), suspended = ?, attempts = ?,
            bytes = ?, expected = ?, validator = ?, error_code = ?, error_message = ?, finished = ?
        WHERE id = ?
        """

    /// `updateSQL` without the spec.
    private static let detailsSQL = """
        UPDATE transfers SET phase = ?, phase_date = ?, outcome = coalesce(?, outcome), suspended = ?, attempts = ?,
            bytes = ?, expected = ?, validator = ?, response = ?, response_body = ?, error_code = ?, error_message = ?, finished = ?,
            upload_resume = ?
        WHERE id = ?
        """

    private static let updateSQL = """
        UPDATE transfers SET spec = ?, phase = ?, phase_date = ?, outcome = coalesce(?, outcome), suspended = ?, attempts = ?,
            bytes = ?, expected = ?, validator = ?, response = ?, response_body = ?, error_code = ?, error_message = ?, finished = ?,
            upload_resume = ?
        WHERE id = ?
        """

    /// The values of `updateSQL` for a record, its secrets sealed (of
    /// `stateSQL` or `detailsSQL` for those parts); the row id last.
    private func columns(of record: TransferRecord, _ part: Part = .whole) throws -> [SQLiteValue] {
        guard let seal else { throw BackgroundWireError("the journal was opened to read; its key is not at hand") }
        var date: SQLiteValue = .null
        var outcome: SQLiteValue = .null
        switch record.machine.phase {
        case .waitingForBeginDate(let at), .retrying(_, let at): date = .real(at.timeIntervalSince1970)
        case .finished(let result):
            switch result {
            case .succeeded: outcome = .text("succeeded")
            case .failed: outcome = .text("failed")
            case .cancelled: outcome = .text("cancelled")
            }
        default: break
        }
        if part == .state {
            return [
                .text(record.phaseName), date, outcome, .integer(record.suspended ? 1 : 0), .integer(Int64(record.machine.attempts)),
                .integer(record.machine.bytes), .integer(record.expected), record.machine.validator.map { .text($0) } ?? .null,
                record.errorCode.map { .text($0) } ?? .null, record.errorMessage.map { .text($0) } ?? .null,
                record.finished.map { .real($0.timeIntervalSince1970) } ?? .null, .integer(record.id),
            ]
        }
        let spec: [SQLiteValue] = part == .whole ? [.text(try JournalJSON.spec(seal.sealed(record.spec)))] : []
        return spec + [
            .text(record.phaseName), date, outcome,
            .integer(record.suspended ? 1 : 0), .integer(Int64(record.machine.attempts)), .integer(record.machine.bytes),
            .integer(record.expected), record.machine.validator.map { .text($0) } ?? .null,
            try record.response.map { .text(JournalJSON.response(try seal.sealed($0))) } ?? .null, record.responseBody.map { .blob($0) } ?? .null,
            record.errorCode.map { .text($0) } ?? .null, record.errorMessage.map { .text($0) } ?? .null,
            record.finished.map { .real($0.timeIntervalSince1970) } ?? .null, try record.uploadResume.map { .blob(try Self.sealed($0, seal)) } ?? .null,
            .integer(record.id),
        ]
    }

    /// An upload's resume data as stored: sealed whole when one of its URLs
    /// holds a password or a secret query value.
    private static func sealed(_ blob: Data, _ seal: JournalSeal) throws -> Data {
        struct URLs: Decodable {
            var url: String?
            var resumptionURL: String?
        }
        let urls = try? JSONDecoder().decode(URLs.self, from: blob)
        guard [urls?.url, urls?.resumptionURL].contains(where: { $0.map(JournalSeal.holdsSecret) ?? false }) else { return blob }
        return Data(try seal.seal(String(decoding: blob, as: UTF8.self)).utf8)
    }

    /// Stored resume data as written; nil (logged) when it was sealed and cannot be unsealed.
    private func unsealedUploadResume(_ stored: Data, task: Int, session: String) -> Data? {
        let text = String(decoding: stored, as: UTF8.self)
        guard JournalSeal.isSealed(text) else { return stored }
        guard let seal, let plain = seal.unseal(text) else {
            if seal != nil { logger.warning("task \(task) of \(session): cannot unseal its upload resume data; the upload starts over") }
            return nil
        }
        return Data(plain.utf8)
    }

    /// The next task identifier of a session (1 for a new one).
    package func nextTask(session: String) throws -> Int {
        let next = try database.read { (connection: Connection) throws(SQLiteError) in
            try connection.scalarInt("SELECT next_task FROM sessions WHERE identifier = ?", [.text(session)])
        }
        return Int(clamping: max(1, next ?? 1))
    }

    /// Remembers, as a session's app attaches, the command that relaunches
    /// it (nil: none) and its credential store's folder; its launches so
    /// far are forgotten.
    package func recordAttachment(launchCommand command: [String]?, credentialStore: String?, session: String) throws {
        let text = try command.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
        try database.write { (connection: Connection) throws(SQLiteError) in
            try connection.run(
                """
                INSERT INTO sessions(identifier, launch_command, credential_store) VALUES (?, ?, ?)
                ON CONFLICT(identifier) DO UPDATE SET launch_command = excluded.launch_command,
                    credential_store = excluded.credential_store, launches = 0, launched = NULL
                """, [.text(session), text.map { .text($0) } ?? .null, credentialStore.map { .text($0) } ?? .null])
        }
    }

    /// The folder of a session's persistent credential store, if it has one.
    package func credentialStore(session: String) throws -> String? {
        try database.read { (connection: Connection) throws(SQLiteError) in
            try connection.query("SELECT credential_store FROM sessions WHERE identifier = ?", [.text(session)]) { $0.text(0) }.first ?? nil
        }
    }

    /// A session's launch command and its launches since the app last attached.
    package struct LaunchState: Sendable, Equatable {
        /// The program and its arguments; nil when the session registered none.
        package var command: [String]?
        /// Launches since the app last attached.
        package var launches: Int
        /// The last of them.
        package var launched: Date?
    }

    /// The command that relaunches a session's app, and its launches.
    package func launchState(session: String) throws -> LaunchState {
        let row = try database.read { (connection: Connection) throws(SQLiteError) in
            try connection.query("SELECT launch_command, launches, launched FROM sessions WHERE identifier = ?", [.text(session)]) {
                ($0.text(0), $0.int64(1), $0.isNull(2) ? nil : $0.double(2))
            }.first
        }
        guard let row else { return LaunchState(command: nil, launches: 0, launched: nil) }
        let command = row.0.flatMap { try? JSONDecoder().decode([String].self, from: Data($0.utf8)) }
        // A crafted journal's numbers are clamped, never trusted.
        let launched = row.2.flatMap { $0.isFinite ? Date(timeIntervalSince1970: $0) : nil }
        return LaunchState(command: command, launches: Int(clamping: max(0, row.1)), launched: launched)
    }

    /// The command that relaunches a session's app, if it registered one.
    package func launchCommand(session: String) throws -> [String]? {
        try launchState(session: session).command
    }

    /// Counts a launch, written before the command runs.
    package func recordLaunch(session: String, at date: Date) throws {
        try database.write { (connection: Connection) throws(SQLiteError) in
            try connection.run(
                "UPDATE sessions SET launches = launches + 1, launched = ? WHERE identifier = ?", [.real(date.timeIntervalSince1970), .text(session)])
        }
    }

    /// Forgets delivered tasks finished before `date`.
    package func pruneDelivered(before date: Date) throws {
        try database.write { (connection: Connection) throws(SQLiteError) in
            try connection.run("DELETE FROM transfers WHERE phase = 'delivered' AND coalesce(finished, created) < ?", [.real(date.timeIntervalSince1970)])
        }
    }
}
