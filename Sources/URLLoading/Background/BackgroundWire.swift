package import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What a background session and `transferd` say to each other over the
/// Unix socket: one JSON message per frame, a frame being the
/// mark byte, the format's version, a 4-byte big-endian length and that
/// many bytes. The socket's folder is per user and the peer's uid is
/// checked. An upload's `create` may carry its body's open descriptor.
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
    /// The delegate's answer to a challenge transferd passed on.
    case answerChallenge(task: Int, answer: BackgroundChallengeAnswer)
    /// A tool cancels a task of any session (`transferd cancel`).
    case cancelTransfer(session: String, task: Int)
    /// A tool has a task waiting to retry go now (`cachetool transfers retry`).
    case retryTransfer(session: String, task: Int)

    // MARK: transferd to app

    /// The attachment is accepted: task identifiers go on from `nextTask`;
    /// `tasks` are the identifier's unfinished and undelivered tasks;
    /// `pending` of them have finished and their events follow, then
    /// `eventsDone`. `revision` is what transferd understands beyond the
    /// first messages (`BackgroundMessage.revision`); nil from a transferd
    /// older than revisions.
    case attached(nextTask: Int, tasks: [TaskSummary], pending: Int, revision: Int?)
    /// The attachment is refused (another live session has the identifier).
    case refused(reason: String)
    /// Bytes moved since the last report (summaries may be coalesced).
    case progress(task: Int, sent: Int64, written: Int64, expectedToSend: Int64, expectedToWrite: Int64)
    /// The begin date came: ask the delegate.
    case askBegin(task: Int)
    /// A server or proxy asks for credentials: ask the delegate, then answer.
    case challenge(task: Int, challenge: BackgroundChallenge)
    /// A task ended; acknowledge it once its events were delivered.
    case finished(TaskResult)
    /// Every event waiting when the session attached was sent.
    case eventsDone
    /// An answer to a tool's request.
    case done(ok: Bool, message: String)
}

extension BackgroundMessage {
    /// The additions to the messages this side understands, said by both
    /// ends when attaching (each side uses an addition only when the other
    /// said it understands it; the frame's version stays, so an older peer
    /// goes on working). 2: a `create` may ask that its task start at once
    /// (`TaskSpec.resumed`), and a download's last progress goes with its
    /// `finished` (`TaskResult.expectedToWrite`) instead of a frame of its own.
    /// 3: frames of the compact body (`BackgroundFraming.compactVersion`) are read.
    package static let revision = 3
}

/// Who attaches.
package struct Attachment: Codable, Sendable, Equatable {
    package var identifier: String
    package var processID: Int32
    /// Run when events wait and no session is attached (`sessionSendsLaunchEvents`).
    package var launchCommand: [String]?
    /// The folder of the session's persistent credential store, whose
    /// default credentials answer challenges when no app is attached.
    package var credentialStore: String?
    /// The app's `BackgroundMessage.revision`; nil from an app older than revisions.
    package var revision: Int?

    package init(
        identifier: String, processID: Int32, launchCommand: [String]?, credentialStore: String? = nil, revision: Int? = BackgroundMessage.revision
    ) {
        self.identifier = identifier
        self.processID = processID
        self.launchCommand = launchCommand
        self.credentialStore = credentialStore
        self.revision = revision
    }
}

/// A request as `transferd` keeps it.
package struct RequestSpec: Codable, Sendable, Equatable {
    package var url: String
    package var method: String
    /// In the order set; `Authorization` and `Cookie` values among them are
    /// secrets (the journal is 0600; they are never printed).
    package var headers: [[String]]
    /// Seconds without progress before the transfer fails; at most
    /// `longestTimeout` (a message with more is refused).
    package var timeout: Double

    /// The longest timeout a message carries: a week without a byte, as
    /// good as none.
    package static let longestTimeout: Double = 86_400 * 7

    package init(url: String, method: String, headers: [[String]], timeout: Double) {
        self.url = url
        self.method = method
        self.headers = headers
        self.timeout = timeout
    }

    /// The timeout a message carries for a request's effective one: no limit
    /// (zero or less, infinity, NaN: what a foreground task runs without a
    /// limit) and anything longer become `longestTimeout`.
    package static func carried(_ timeout: TimeInterval) -> Double {
        timeout.isFinite && timeout > 0 ? min(timeout, longestTimeout) : longestTimeout
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
    /// True when the `create` frame carries an open descriptor of the body
    /// (`SCM_RIGHTS`): transferd copies from it, so the app may delete its
    /// file, or die, the moment `resume()` returned.
    package var bodyPassed: Bool?
    package var earliestBeginDate: Date?
    package var isDiscretionary: Bool
    package var taskDescription: String?
    /// The proxies the app's configuration chose; nil for none (and in
    /// journals written before they were carried). A proxy holding a
    /// password is sealed in the journal.
    package var proxies: ProxyRules?
    /// The PEM file of trust roots the app's configuration verifies
    /// servers against instead of the system's (`trustRootsFile`); nil
    /// for the system's.
    package var trustRootsFile: String?
    /// The resumable uploads' interop version the app's configuration
    /// chose (`resumableUploadVersion`), 0 for none; nil (journals written
    /// before it was carried) for the default.
    package var resumableUploadVersion: Int?
    /// The TLS versions the app's configuration allows
    /// (`tlsMinimumSupportedVersion`, `tlsMaximumSupportedVersion`), each
    /// `[major, minor]`; nil for the default.
    package var tlsMinimumVersion: [Int]?
    package var tlsMaximumVersion: [Int]?
    /// Sent with `create` to a transferd of revision 2 or later: the task
    /// starts at once, without a `resume` of its own. Not kept in the journal.
    package var resumed: Bool?

    package init(
        task: Int, kind: Kind, request: RequestSpec, bodyFile: String?, earliestBeginDate: Date?, isDiscretionary: Bool,
        taskDescription: String?, proxies: ProxyRules? = nil, trustRootsFile: String? = nil, resumableUploadVersion: Int? = nil,
        tlsMinimumVersion: [Int]? = nil, tlsMaximumVersion: [Int]? = nil
    ) {
        self.tlsMinimumVersion = tlsMinimumVersion
        self.tlsMaximumVersion = tlsMaximumVersion
        self.proxies = proxies
        self.trustRootsFile = trustRootsFile
        self.resumableUploadVersion = resumableUploadVersion
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
    /// The server's reason phrase (absent from journals written before it was kept).
    package var reasonPhrase: String?

    package init(url: String, status: Int, httpVersion: String, headers: [[String]], reasonPhrase: String? = nil) {
        self.url = url
        self.status = status
        self.httpVersion = httpVersion
        self.headers = headers
        self.reasonPhrase = reasonPhrase
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
    /// A download's whole length as its head said (-1 unknown), for the
    /// last progress report, which goes with this message to an app of
    /// revision 2 or later; nil otherwise.
    package var expectedToWrite: Int64?

    package init(
        task: Int, file: String?, response: ResponseSpec?, body: Data?, errorCode: String?, errorMessage: String?, sent: Int64, written: Int64,
        expectedToWrite: Int64? = nil
    ) {
        self.expectedToWrite = expectedToWrite
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
///
/// A frame is a 6-byte header — the byte `0x55` ("U"), the format's
/// version, the body's length as a 4-byte big-endian number — then that
/// many bytes of JSON. A frame of another version, one announcing more than
/// `maximumFrame` bytes, a body that is not a message, or a message whose
/// numbers or sizes are out of bounds (`BackgroundMessage.check()`) is an
/// error: the reader closes that connection and nothing else.
package struct BackgroundFraming: Sendable {
    /// The first byte of every frame: something else (a stray client, an
    /// HTTP request) is refused at its first byte.
    package static let magic: UInt8 = 0x55
    /// The version of frames of JSON, which every peer reads; a peer of
    /// another version is refused with a clear error.
    package static let version: UInt8 = 1
    /// The version of frames of a compact body (`CompactWire`), sent only
    /// to a peer of revision 3 or later.
    package static let compactVersion: UInt8 = 2
    package static let headerLength = 6
    /// The largest frame either end accepts (a summary of many tasks fits;
    /// a peer announcing more is not followed).
    package static let maximumFrame = 16 << 20
    /// The most descriptors received and not yet claimed by a message.
    package static let maximumDescriptors = 8
    private var buffer = Data()
    /// Descriptors received with the bytes (`SCM_RIGHTS`), oldest first;
    /// each belongs to the next message that says it carries one.
    private var descriptors: [Int32] = []

    package init() {}

    /// - Parameter compact: A frame of the compact body, for a peer that reads them.
    package static func encode(_ message: BackgroundMessage, compact: Bool = false) throws -> Data {
        let body = compact ? try CompactWire.encode(message) : try JSONEncoder().encode(message)
        guard body.count <= maximumFrame else { throw BackgroundWireError("a message of \(body.count) bytes is over the frame limit") }
        var frame = Data([magic, compact ? compactVersion : version])
        let length = UInt32(body.count)
        frame.append(contentsOf: [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)])
        frame.append(body)
        return frame
    }

    /// Bytes read from the socket.
    package mutating func append(_ bytes: Data) {
        buffer.append(bytes)
    }

    /// Descriptors that came with the bytes read.
    ///
    /// - Throws: `BackgroundWireError` when more than
    ///   ``maximumDescriptors`` wait unclaimed (all of them are closed).
    package mutating func append(descriptors received: [Int32]) throws(BackgroundWireError) {
        descriptors += received
        guard descriptors.count <= Self.maximumDescriptors else {
            closeDescriptors()
            throw BackgroundWireError("the peer passed more than \(Self.maximumDescriptors) descriptors no message claimed")
        }
    }

    /// The oldest descriptor no message claimed yet; the caller owns it.
    package mutating func takeDescriptor() -> Int32? {
        descriptors.isEmpty ? nil : descriptors.removeFirst()
    }

    /// Closes every unclaimed descriptor (at the end of a connection).
    package mutating func closeDescriptors() {
        for descriptor in descriptors { _ = Glibc.close(descriptor) }
        descriptors = []
    }

    /// The next whole message, nil when more bytes are needed.
    ///
    /// - Throws: `BackgroundWireError`: a frame of another kind or version,
    ///   over the limit, not a message, or a message out of bounds.
    package mutating func next() throws(BackgroundWireError) -> BackgroundMessage? {
        let start = buffer.startIndex
        if buffer.count >= 1, buffer[start] != Self.magic {
            throw BackgroundWireError("a frame does not start with the background format's mark (0x55): not a transferd peer")
        }
        if buffer.count >= 2, buffer[start + 1] != Self.version, buffer[start + 1] != Self.compactVersion {
            throw BackgroundWireError(
                "a frame of format version \(buffer[start + 1]); this side speaks versions \(Self.version) and \(Self.compactVersion)")
        }
        guard buffer.count >= Self.headerLength else { return nil }
        let length = buffer[(start + 2)..<(start + 6)].reduce(0) { ($0 << 8) | Int($1) }
        guard length <= Self.maximumFrame else { throw BackgroundWireError("a frame announces \(length) bytes, over the limit of \(Self.maximumFrame)") }
        guard buffer.count >= Self.headerLength + length else { return nil }
        let bodyStart = start + Self.headerLength
        let body = buffer[bodyStart..<(bodyStart + length)]
        let message: BackgroundMessage
        if buffer[start + 1] == Self.compactVersion {
            message = try CompactWire.decode(Data(body))
        } else {
            do {
                message = try JSONDecoder().decode(BackgroundMessage.self, from: body)
            } catch {
                throw BackgroundWireError("a frame is not a message: \(error)")
            }
        }
        buffer = Data(buffer[(bodyStart + length)...])
        try message.check()
        return message
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
