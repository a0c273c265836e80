package import Foundation

/// What a background session and `transferd` say to each other over the
/// Unix socket (issue 20): one JSON message per frame, a frame being a
/// 4-byte big-endian length and that many bytes. Both ends are this
/// package, built together, so the format has no version of its own: the
/// socket's folder is per user and the peer's uid is checked.
package enum BackgroundMessage: Codable, Sendable, Equatable {
    // MARK: App to transferd

    /// A session with this identifier attaches; at most one at a time.
    case attach(Attachment)
    /// A new task (it starts when resumed).
    case create(TaskSpec)
    case resume(task: Int)
    case suspend(task: Int)
    case cancel(task: Int)
    /// The delegate's answer to `willBeginDelayedRequest`: go on (with
    /// `request` in place of the task's when given) or cancel.
    case answerBegin(task: Int, proceed: Bool, request: RequestSpec?)
    /// The delegate returned from the task's last event: never again.
    case acknowledge(task: Int)
    /// A tool cancels a task of any session (`transferd cancel`).
    case cancelTransfer(session: String, task: Int)

    // MARK: transferd to app

    /// The attachment is accepted: task identifiers go on from `nextTask`;
    /// `tasks` are the identifier's unfinished and undelivered tasks;
    /// `pending` of them have finished and their events follow, then
    /// `eventsDone`.
    case attached(nextTask: Int, tasks: [TaskSummary], pending: Int)
    /// The attachment is refused (another live session has the identifier).
    case refused(reason: String)
    /// Bytes moved since the last report (summaries may be coalesced).
    case progress(task: Int, sent: Int64, written: Int64, expectedToSend: Int64, expectedToWrite: Int64)
    /// The begin date came: ask the delegate.
    case askBegin(task: Int)
    /// A task ended; acknowledge it once its events were delivered.
    case finished(TaskResult)
    /// Every event waiting when the session attached was sent.
    case eventsDone
    /// An answer to a tool's request.
    case done(ok: Bool, message: String)
}

/// Who attaches.
package struct Attachment: Codable, Sendable, Equatable {
    package var identifier: String
    package var processID: Int32
    /// Run when events wait and no session is attached (`sessionSendsLaunchEvents`).
    package var launchCommand: [String]?

    package init(identifier: String, processID: Int32, launchCommand: [String]?) {
        self.identifier = identifier
        self.processID = processID
        self.launchCommand = launchCommand
    }
}

/// A request as `transferd` keeps it.
package struct RequestSpec: Codable, Sendable, Equatable {
    package var url: String
    package var method: String
    /// In the order set; `Authorization` and `Cookie` values among them are
    /// secrets (the journal is 0600; they are never printed).
    package var headers: [[String]]
    package var timeout: Double

    package init(url: String, method: String, headers: [[String]], timeout: Double) {
        self.url = url
        self.method = method
        self.headers = headers
        self.timeout = timeout
    }
}

/// A new background task.
package struct TaskSpec: Codable, Sendable, Equatable {
    package enum Kind: String, Codable, Sendable {
        case download, upload
    }
    package var task: Int
    package var kind: Kind
    package var request: RequestSpec
    /// An upload's body; transferd keeps a copy of its own before it answers.
    package var bodyFile: String?
    package var earliestBeginDate: Date?
    package var isDiscretionary: Bool
    package var taskDescription: String?

    package init(
        task: Int, kind: Kind, request: RequestSpec, bodyFile: String?, earliestBeginDate: Date?, isDiscretionary: Bool,
        taskDescription: String?
    ) {
        self.task = task
        self.kind = kind
        self.request = request
        self.bodyFile = bodyFile
        self.earliestBeginDate = earliestBeginDate
        self.isDiscretionary = isDiscretionary
        self.taskDescription = taskDescription
    }
}

/// A task as a re-attached session sees it.
package struct TaskSummary: Codable, Sendable, Equatable {
    package var spec: TaskSpec
    package var finished: Bool
    package var sent: Int64
    package var written: Int64
    package var expectedToWrite: Int64

    package init(spec: TaskSpec, finished: Bool, sent: Int64, written: Int64, expectedToWrite: Int64) {
        self.spec = spec
        self.finished = finished
        self.sent = sent
        self.written = written
        self.expectedToWrite = expectedToWrite
    }
}

/// A final response head.
package struct ResponseSpec: Codable, Sendable, Equatable {
    package var url: String
    package var status: Int
    package var httpVersion: String
    package var headers: [[String]]

    package init(url: String, status: Int, httpVersion: String, headers: [[String]]) {
        self.url = url
        self.status = status
        self.httpVersion = httpVersion
        self.headers = headers
    }
}

/// How a task ended.
package struct TaskResult: Codable, Sendable, Equatable {
    package var task: Int
    /// A download's whole body (transferd's file: the app's delegate moves it or it goes).
    package var file: String?
    package var response: ResponseSpec?
    /// An upload's response body (bounded).
    package var body: Data?
    /// The `SessionError.Code` name and message, when the task failed.
    package var errorCode: String?
    package var errorMessage: String?
    package var sent: Int64
    package var written: Int64

    package init(
        task: Int, file: String?, response: ResponseSpec?, body: Data?, errorCode: String?, errorMessage: String?, sent: Int64, written: Int64
    ) {
        self.task = task
        self.file = file
        self.response = response
        self.body = body
        self.errorCode = errorCode
        self.errorMessage = errorMessage
        self.sent = sent
        self.written = written
    }
}

/// Frames messages for the socket and takes them apart again.
package struct BackgroundFraming: Sendable {
    /// The largest frame either end accepts (a summary of many tasks fits;
    /// a peer announcing more is not followed).
    package static let maximumFrame = 16 << 20
    private var buffer = Data()

    package init() {}

    package static func encode(_ message: BackgroundMessage) throws -> Data {
        let body = try JSONEncoder().encode(message)
        guard body.count <= maximumFrame else { throw BackgroundWireError("a message of \(body.count) bytes is over the frame limit") }
        var length = UInt32(body.count).bigEndian
        var frame = Data(bytes: &length, count: 4)
        frame.append(body)
        return frame
    }

    package mutating func append(_ bytes: Data) {
        buffer.append(bytes)
    }

    /// The next whole message, nil when more bytes are needed.
    ///
    /// - Throws: A frame over the limit, or one that is not a message.
    package mutating func next() throws -> BackgroundMessage? {
        guard buffer.count >= 4 else { return nil }
        let start = buffer.startIndex
        let length = buffer[start..<start + 4].reduce(0) { ($0 << 8) | Int($1) }
        guard length <= Self.maximumFrame else { throw BackgroundWireError("a frame announces \(length) bytes, over the limit") }
        guard buffer.count >= 4 + length else { return nil }
        let body = buffer[(start + 4)..<(start + 4 + length)]
        buffer = Data(buffer[(start + 4 + length)...])
        do {
            return try JSONDecoder().decode(BackgroundMessage.self, from: body)
        } catch {
            throw BackgroundWireError("a frame is not a message: \(error)")
        }
    }
}

/// A failure of the link between a background session and `transferd`.
package struct BackgroundWireError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

extension RequestSpec {
    /// Header names whose values are secrets: kept in the journal, never shown.
    package static let secretHeaders: Set<String> = ["authorization", "proxy-authorization", "cookie"]

    /// The headers with secret values replaced, for listings.
    package var redactedHeaders: [[String]] {
        headers.map { pair in
            guard pair.count == 2 else { return pair }
            return Self.secretHeaders.contains(pair[0].lowercased()) ? [pair[0], "(secret)"] : pair
        }
    }
}
