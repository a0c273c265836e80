import Foundation
#if canImport(Glibc)
import Glibc
#endif
package import URLLoading

/// `transferd list` and `show`: what each task is doing, never its secrets
/// (Authorization and Cookie values, the URL's password and query values).
package enum TransferListing {
    struct Row: Encodable {
        var session: String
        var task: Int
        var kind: String
        var state: String
        var outcome: String?
        var url: String
        var method: String
        var bytes: Int64
        var expected: Int64
        var attempts: Int
        var suspended: Bool
        var status: Int?
        var error: String?
        var created: Date
        var finished: Date?
        var headers: [[String]]
        /// An upload's resumption URL (redacted), once its server named one.
        var resumption: String?
    }

    /// What a listing shows of an upload's resume data.
    private struct Resumption: Decodable {
        var resumptionURL: String
    }

    static func row(_ record: TransferRecord) -> Row {
        var outcome: String?
        if case .finished(let result) = record.machine.phase {
            switch result {
            case .succeeded: outcome = "succeeded"
            case .failed: outcome = "failed"
            case .cancelled: outcome = "cancelled"
            }
        }
        return Row(
            session: record.session, task: record.spec.task, kind: record.spec.kind.rawValue, state: record.phaseName, outcome: outcome,
            url: redacted(record.spec.request.url), method: record.spec.request.method, bytes: record.machine.bytes, expected: record.expected,
            attempts: record.machine.attempts, suspended: record.suspended, status: record.response?.status,
            error: record.errorCode.map { "\($0): \(record.errorMessage ?? "")" }, created: record.created, finished: record.finished,
            headers: record.spec.request.redactedHeaders,
            resumption: record.uploadResume.map { (try? JSONDecoder().decode(Resumption.self, from: $0)).map { redacted($0.resumptionURL) } ?? "(unreadable)" })
    }

    /// The records with each running download's bytes as its partial file
    /// holds them now (the journal keeps a transfer's bytes at its end, not
    /// as it goes). Read only; nothing is written back.
    package static func live(_ records: [TransferRecord], paths: BackgroundPaths) -> [TransferRecord] {
        records.map { record in
            guard record.spec.kind == .download, case .running = record.machine.phase else { return record }
            var status = stat()
            guard stat(paths.partialFile(record.id), &status) == 0, status.st_size >= 0 else { return record }
            var live = record
            live.machine.noteBytes(Int64(status.st_size))
            return live
        }
    }

    /// A URL without user, password or query values.
    static func redacted(_ text: String) -> String {
        if JournalSeal.isSealed(text) { return "(a URL with secrets, sealed)" }
        guard var components = URLComponents(string: text) else { return "(unreadable URL)" }
        components.user = nil
        components.password = nil
        if let items = components.queryItems { components.queryItems = items.map { URLQueryItem(name: $0.name, value: $0.value == nil ? nil : "…") } }
        components.fragment = nil
        return components.string ?? "(unreadable URL)"
    }

    package static func json(_ records: [TransferRecord]) throws -> String {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(records.map(row)), as: UTF8.self)
    }

    package static func table(_ records: [TransferRecord]) -> String {
        var text = "SESSION\tTASK\tKIND\tSTATE\tBYTES\tEXPECTED\tURL\n"
        for row in records.map(row) {
            text += "\(row.session)\t\(row.task)\t\(row.kind)\t\(row.outcome.map { "\(row.state) (\($0))" } ?? row.state)\t\(row.bytes)\t\(row.expected)\t\(row.url)\n"
        }
        return text
    }

    package static func details(_ record: TransferRecord) -> String {
        let row = row(record)
        var lines = [
            "session: \(row.session)", "task: \(row.task)", "kind: \(row.kind)", "state: \(row.state)\(row.suspended ? " (suspended)" : "")",
            "request: \(row.method) \(row.url)", "bytes: \(row.bytes) of \(row.expected < 0 ? "unknown" : "\(row.expected)")",
            "attempts: \(row.attempts)",
        ]
        lines += row.headers.filter { $0.count == 2 }.map { "header: \($0[0]): \($0[1])" }
        if let resumption = row.resumption { lines.append("resumes at: \(resumption)") }
        if let outcome = row.outcome { lines.append("outcome: \(outcome)") }
        if let status = row.status { lines.append("status: \(status)") }
        if let error = row.error { lines.append("error: \(error)") }
        return lines.joined(separator: "\n")
    }
}

extension BackgroundPaths {
    /// A download's body while it comes, named by its journal row (a
    /// number, never a name read from anywhere).
    package func partialFile(_ id: Int64) -> String { "\(files)/partial-\(id)" }
}
