import Foundation

/// Bounds on what a peer may say: every number and size
/// in a message is checked before either end uses it, so a hostile or
/// broken peer gets its connection closed, never a trap or a huge allocation.
extension BackgroundMessage {
    /// Task identifiers are positive and fit the journal's and Apple's `Int`s on every platform.
    static let taskRange = 1...Int(Int32.max)
    /// A session identifier: what a person names a session, not a document.
    static let maximumIdentifierBytes = 1024
    /// A URL, a header value, a path or a reason.
    static let maximumTextBytes = 64 << 10
    static let maximumHeaders = 512
    static let maximumArguments = 256
    /// An upload's response body as transferd keeps it.
    static let maximumBody = 1 << 20
    static let maximumTasks = 100_000

    /// Throws when a field is out of bounds.
    package func check() throws(BackgroundWireError) {
        switch self {
        case .attach(let attachment):
            try Self.identifier(attachment.identifier)
            guard attachment.processID > 0 else { throw BackgroundWireError("a process id of \(attachment.processID)") }
            if let revision = attachment.revision { try Self.revision(revision) }
            if let command = attachment.launchCommand {
                guard command.count <= Self.maximumArguments else { throw BackgroundWireError("a launch command of \(command.count) arguments") }
                for argument in command { try Self.text(argument, "a launch argument") }
            }
            if let folder = attachment.credentialStore {
                try Self.text(folder, "a credential store's folder")
                guard folder.hasPrefix("/"), !folder.utf8.contains(0) else { throw BackgroundWireError("a credential store's folder that is not an absolute path") }
            }
        case .create(let spec): try spec.check()
        case .resume(let task), .suspend(let task), .cancel(let task), .acknowledge(let task), .askBegin(let task): try Self.task(task)
        case .answerChallenge(let task, let answer):
            try Self.task(task)
            try answer.check()
        case .challenge(let task, let challenge):
            try Self.task(task)
            try challenge.check()
        case .answerBegin(let task, _, let request):
            try Self.task(task)
            try request?.check()
        case .cancelTransfer(let session, let task), .retryTransfer(let session, let task):
            try Self.identifier(session)
            try Self.task(task)
        case .attached(let nextTask, let tasks, let pending, let revision):
            try Self.task(nextTask)
            if let revision { try Self.revision(revision) }
            guard tasks.count <= Self.maximumTasks, (0...tasks.count).contains(pending) else {
                throw BackgroundWireError("an attachment of \(tasks.count) tasks with \(pending) pending")
            }
            for summary in tasks {
                try summary.spec.check()
                try Self.counts(summary.sent, summary.written, summary.expectedToWrite)
            }
        case .refused(let reason): try Self.text(reason, "a reason")
        case .progress(let task, let sent, let written, let expectedToSend, let expectedToWrite):
            try Self.task(task)
            try Self.counts(sent, written, expectedToSend, expectedToWrite)
        case .finished(let result):
            try result.check()
            if let expected = result.expectedToWrite { try Self.counts(expected) }
        case .eventsDone: break
        case .done(_, let message): try Self.text(message, "a message")
        }
    }

    static func task(_ task: Int) throws(BackgroundWireError) {
        guard taskRange.contains(task) else { throw BackgroundWireError("a task identifier of \(task), outside \(taskRange)") }
    }

    static func identifier(_ identifier: String) throws(BackgroundWireError) {
        let bytes = identifier.utf8.count
        guard bytes > 0, bytes <= maximumIdentifierBytes else {
            throw BackgroundWireError("a session identifier of \(bytes) bytes (1 to \(maximumIdentifierBytes))")
        }
        guard !identifier.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw BackgroundWireError("a session identifier with a control character")
        }
    }

    static func text(_ text: String, _ what: String) throws(BackgroundWireError) {
        guard text.utf8.count <= maximumTextBytes else { throw BackgroundWireError("\(what) of \(text.utf8.count) bytes, over \(maximumTextBytes)") }
    }

    /// Byte counts: -1 (unknown) or more.
    /// A peer's revision: from 1, and small (a later build's may be higher than ours).
    static func revision(_ revision: Int) throws(BackgroundWireError) {
        guard (1...1_000).contains(revision) else { throw BackgroundWireError("a revision of \(revision)") }
    }

    static func counts(_ counts: Int64...) throws(BackgroundWireError) {
        for count in counts where count < -1 { throw BackgroundWireError("a byte count of \(count)") }
    }
}

extension RequestSpec {
    func check() throws(BackgroundWireError) {
        try BackgroundMessage.text(url, "a URL")
        guard let scheme = URL(string: url)?.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw BackgroundWireError("a request URL that is not http or https")
        }
        guard (1...32).contains(method.utf8.count), method.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw BackgroundWireError("a request method that is not a token")
        }
        guard headers.count <= BackgroundMessage.maximumHeaders else { throw BackgroundWireError("a request of \(headers.count) header fields") }
        for pair in headers {
            guard pair.count == 2 else { throw BackgroundWireError("a header field of \(pair.count) parts") }
            for part in pair {
                try BackgroundMessage.text(part, "a header field")
                // CR, LF or NUL would split or end the field on the wire.
                guard !part.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                    throw BackgroundWireError("a header field with CR, LF or NUL")
                }
            }
        }
        guard timeout.isFinite, timeout >= 0, timeout <= RequestSpec.longestTimeout else { throw BackgroundWireError("a request timeout of \(timeout) s") }
    }
}

extension TaskSpec {
    func check() throws(BackgroundWireError) {
        try BackgroundMessage.task(task)
        try request.check()
        if let bodyFile {
            try BackgroundMessage.text(bodyFile, "a body file")
            guard bodyFile.hasPrefix("/"), !bodyFile.utf8.contains(0) else { throw BackgroundWireError("a body file that is not an absolute path") }
        }
        if let earliestBeginDate {
            guard earliestBeginDate.timeIntervalSince1970.isFinite else { throw BackgroundWireError("a begin date that is not a date") }
        }
        if let taskDescription { try BackgroundMessage.text(taskDescription, "a task description") }
    }
}

extension TaskResult {
    func check() throws(BackgroundWireError) {
        try BackgroundMessage.task(task)
        if let file { try BackgroundMessage.text(file, "a file") }
        if let response {
            try BackgroundMessage.text(response.url, "a response URL")
            guard (100...999).contains(response.status) else { throw BackgroundWireError("a status of \(response.status)") }
            guard response.headers.count <= BackgroundMessage.maximumHeaders, response.headers.allSatisfy({ $0.count == 2 }) else {
                throw BackgroundWireError("a response of malformed header fields")
            }
            for pair in response.headers { for part in pair { try BackgroundMessage.text(part, "a response header field") } }
        }
        guard (body?.count ?? 0) <= BackgroundMessage.maximumBody else { throw BackgroundWireError("a response body of \(body?.count ?? 0) bytes") }
        if let errorCode { try BackgroundMessage.text(errorCode, "an error code") }
        if let errorMessage { try BackgroundMessage.text(errorMessage, "an error message") }
        try BackgroundMessage.counts(sent, written)
    }
}
