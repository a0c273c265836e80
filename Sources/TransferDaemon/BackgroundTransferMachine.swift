package import Foundation

/// The life of one background transfer inside `transferd`: a pure state machine, events in, actions out. Its owner writes
/// the new state to the journal before it carries out the actions, so a
/// `transferd` killed at any moment finds every transfer where the journal
/// says and resumes it (`recovered(now:)`).
///
/// ```
/// submitted ─(begin date ahead)→ waitingForBeginDate ─wake→ askingToBegin ─continue→ queued
///     └────────────────────────────────────────────────────────────────────────────→ queued
/// queued ─start→ running ─completed→ finished ─acknowledged→ delivered
///                  │  └─retryable failure (attempts left)→ retrying ─wake→ queued
///                  └─other failure, or none left→ finished(failed)
/// any phase before finished ─cancel→ finished(cancelled)
/// ```
package struct BackgroundTransferMachine: Sendable, Equatable {
    package enum Phase: Sendable, Equatable {
        /// The task's earliest begin date is ahead.
        case waitingForBeginDate(Date)
        /// The date came; the app's `willBeginDelayedRequest` is asked.
        case askingToBegin
        /// Ready to start when a transfer slot is free.
        case queued
        /// The transfer runs; `attempt` counts from 1.
        case running(attempt: Int)
        /// A retryable failure; the next attempt starts at the date.
        case retrying(attempt: Int, at: Date)
        /// The result, kept until the app acknowledges its events.
        case finished(Outcome)
        /// The app took the events: the journal row and files may go.
        case delivered
    }

    package enum Outcome: Sendable, Equatable {
        case succeeded(status: Int)
        case failed(reason: String)
        case cancelled
    }

    /// The app's answer to `willBeginDelayedRequest` (a new request is the
    /// owner's to store; for the machine it is a continue).
    package enum BeginAnswer: Sendable, Equatable {
        case proceed
        case cancel
    }

    package enum Action: Sendable, Equatable {
        /// Start the transfer; with `from` > 0, ask for the rest with
        /// `Range: bytes=from-` and `If-Range: validator`.
        case startTransfer(from: Int64, ifRange: String?)
        case cancelTransfer
        /// The partial file is worthless (the resource changed): empty it.
        case truncateFile
        /// Call `wake(now:)` at this date.
        case wake(at: Date)
        case askAppToBegin
        /// Deliver the finished task's events to an attached app (or launch it).
        case deliverEvents
        case removeFiles
    }

    /// Retries after network errors: 5, waiting 30 s, then doubling
    /// (Android's DownloadManager's policy); a server's Retry-After is
    /// honoured between 1 s and 1 h.
    package static let maximumRetries = 5
    package static let firstRetryDelay: TimeInterval = 30
    package static let retryAfterBounds: ClosedRange<TimeInterval> = 1...3600

    package private(set) var phase: Phase
    /// Bytes of the body in the partial file (downloads) or confirmed sent.
    package private(set) var bytes: Int64 = 0
    /// The validator (ETag, else Last-Modified) of the partial body.
    package private(set) var validator: String?
    /// Attempts made so far.
    package private(set) var attempts = 0

    /// A submitted transfer: queued, or waiting for its begin date.
    package init(earliestBeginDate: Date?, now: Date) {
        if let date = earliestBeginDate, date > now {
            phase = .waitingForBeginDate(date)
        } else {
            phase = .queued
        }
    }

    /// A machine as the journal kept it.
    package init(phase: Phase, bytes: Int64, validator: String?, attempts: Int) {
        self.phase = phase
        self.bytes = max(0, bytes)
        self.validator = validator
        self.attempts = max(0, attempts)
    }

    /// What the owner does first with a new or recovered machine.
    package var initialActions: [Action] {
        switch phase {
        case .waitingForBeginDate(let date): [.wake(at: date)]
        case .retrying(_, let date): [.wake(at: date)]
        case .finished: [.deliverEvents]
        default: []
        }
    }

    package var isFinished: Bool {
        switch phase {
        case .finished, .delivered: true
        default: false
        }
    }

    /// A tool asked for a retry now: a task waiting to retry goes at once
    /// (its attempt count kept). False for a task in any other phase.
    package mutating func retryNow() -> Bool {
        guard case .retrying = phase else { return false }
        phase = .queued
        return true
    }

    /// A timer fired: a begin date or a retry time came.
    package mutating func wake(now: Date) -> [Action] {
        switch phase {
        case .waitingForBeginDate(let date):
            guard now >= date else { return [.wake(at: date)] }
            phase = .askingToBegin
            return [.askAppToBegin]
        case .retrying(_, let date):
            guard now >= date else { return [.wake(at: date)] }
            phase = .queued
            return []
        default:
            return []
        }
    }

    package mutating func answerBegin(_ answer: BeginAnswer) -> [Action] {
        guard phase == .askingToBegin else { return [] }
        switch answer {
        case .proceed:
            phase = .queued
            return []
        case .cancel:
            return cancel()
        }
    }

    /// A transfer slot is free for this queued transfer.
    package mutating func start() -> [Action] {
        guard phase == .queued else { return [] }
        attempts += 1
        phase = .running(attempt: attempts)
        // Without a validator a range could join two versions of the resource.
        guard bytes > 0, let validator else {
            let hadBytes = bytes > 0
            bytes = 0
            return (hadBytes ? [.truncateFile] : []) + [.startTransfer(from: 0, ifRange: nil)]
        }
        return [.startTransfer(from: bytes, ifRange: validator)]
    }

    /// The app suspended a running transfer: it stops and waits, queued,
    /// keeping its bytes (the attempt is given back).
    package mutating func interrupted() -> [Action] {
        guard case .running = phase else { return [] }
        attempts = max(0, attempts - 1)
        phase = .queued
        return [.cancelTransfer]
    }

    /// The final head arrived. A 206 continues the partial body; any other
    /// status starts it over (the server ignored the range because the
    /// resource changed, or there was none).
    package mutating func headReceived(status: Int, validator newValidator: String?) -> [Action] {
        guard case .running = phase else { return [] }
        if status == 206, bytes > 0 {
            return []
        }
        let hadBytes = bytes > 0
        bytes = 0
        validator = newValidator
        return hadBytes ? [.truncateFile] : []
    }

    /// Body bytes reached the partial file.
    package mutating func wrote(_ count: Int64) {
        guard case .running = phase, count > 0 else { return }
        let (sum, overflow) = bytes.addingReportingOverflow(count)
        bytes = overflow ? Int64.max : sum
    }

    /// The body bytes in the partial file (or sent) now, as counted by the
    /// transfer that wrote them.
    package mutating func noteBytes(_ total: Int64) {
        guard case .running = phase else { return }
        bytes = max(0, total)
    }

    /// The transfer ended with a response.
    package mutating func completed(status: Int) -> [Action] {
        guard case .running = phase else { return [] }
        phase = .finished(.succeeded(status: status))
        return [.deliverEvents]
    }

    /// The transfer failed. Network errors are retried (with the partial
    /// body kept) while attempts are left; others end the task.
    ///
    /// - Parameter firstDelay: The first retry's wait (30 s; a `transferd`
    ///   setting, shorter in tests).
    package mutating func failed(
        reason: String, retryable: Bool, retryAfter: TimeInterval?, now: Date, firstDelay: TimeInterval = firstRetryDelay
    ) -> [Action] {
        guard case .running(let attempt) = phase else { return [] }
        guard retryable, attempt <= Self.maximumRetries else {
            phase = .finished(.failed(reason: reason))
            return [.deliverEvents]
        }
        let backoff = max(0, firstDelay) * Double(1 << min(attempt - 1, 20))
        let delay = retryAfter.map { min(max($0, Self.retryAfterBounds.lowerBound), Self.retryAfterBounds.upperBound) } ?? backoff
        let date = now.addingTimeInterval(delay)
        phase = .retrying(attempt: attempt, at: date)
        return [.wake(at: date)]
    }

    package mutating func cancel() -> [Action] {
        switch phase {
        case .finished, .delivered:
            return []
        case .running:
            phase = .finished(.cancelled)
            return [.cancelTransfer, .deliverEvents]
        default:
            phase = .finished(.cancelled)
            return [.deliverEvents]
        }
    }

    /// `transferd` started again and found this machine in the journal: a
    /// transfer that was running is queued again, to resume from its bytes.
    ///
    /// - Parameter fileBytes: The partial file's size now (the file, not the
    ///   journal, says how many bytes arrived; nil when there is none).
    package mutating func recovered(now: Date, fileBytes: Int64? = nil) -> [Action] {
        if !isFinished { bytes = max(0, fileBytes ?? 0) }
        switch phase {
        case .running:
            phase = .queued
            return []
        case .askingToBegin:
            // The question died with the old process: ask again.
            return [.askAppToBegin]
        default:
            return initialActions
        }
    }

    /// The app's delegate returned from the task's last event.
    package mutating func acknowledged() -> [Action] {
        guard case .finished = phase else { return [] }
        phase = .delivered
        return [.removeFiles]
    }
}
