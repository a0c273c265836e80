import Foundation
import Testing
@testable import TransferDaemon

/// The background transfer's state machine with events and actions only:
/// no socket, no journal, no process.
@Suite struct BackgroundTransferMachineTests {
    typealias Machine = BackgroundTransferMachine
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("A download's life: queued, started from zero, bytes written, completed, delivered, files removed")
    func plainLife() {
        var machine = Machine(earliestBeginDate: nil, now: Self.t0)
        #expect(machine.phase == .queued && machine.initialActions.isEmpty)
        #expect(machine.start() == [.startTransfer(from: 0, ifRange: nil)])
        #expect(machine.start().isEmpty, "a running transfer does not start twice")
        #expect(machine.headReceived(status: 200, validator: "\"v1\"").isEmpty)
        machine.wrote(1000)
        machine.wrote(24)
        #expect(machine.bytes == 1024 && machine.validator == "\"v1\"")
        #expect(machine.completed(status: 200) == [.deliverEvents])
        #expect(machine.phase == .finished(.succeeded(status: 200)) && machine.isFinished)
        #expect(machine.cancel().isEmpty, "a finished task cannot be cancelled")
        #expect(machine.acknowledged() == [.removeFiles] && machine.phase == .delivered)
        #expect(machine.acknowledged().isEmpty, "events are acknowledged once")
    }

    @Test("retryNow: a task waiting to retry is queued at once, its attempt kept; in any other phase nothing changes")
    func retryNow() {
        var machine = Machine(earliestBeginDate: nil, now: Self.t0)
        var retried = machine.retryNow()
        #expect(!retried, "a queued task is not waiting to retry")
        _ = machine.start()
        retried = machine.retryNow()
        #expect(!retried, "nor a running one")
        #expect(machine.failed(reason: "busy", retryable: true, retryAfter: 3600, now: Self.t0) == [.wake(at: Self.t0.addingTimeInterval(3600))])
        retried = machine.retryNow()
        #expect(retried && machine.phase == .queued)
        #expect(machine.start() == [.startTransfer(from: 0, ifRange: nil)] && machine.attempts == 2)
        #expect(machine.wake(now: Self.t0.addingTimeInterval(3600)).isEmpty, "the old timer changes nothing")
        _ = machine.completed(status: 200)
        retried = machine.retryNow()
        #expect(!retried && machine.phase == .finished(.succeeded(status: 200)))
    }

    @Test("A killed transferd resumes a running download from its bytes with If-Range; a changed resource starts over")
    func recovery() {
        var machine = Machine(phase: .running(attempt: 1), bytes: 4096, validator: "\"v1\"", attempts: 1)
        // The file, not the journal, says how many bytes arrived.
        #expect(machine.recovered(now: Self.t0, fileBytes: 5000).isEmpty && machine.phase == .queued)
        #expect(machine.start() == [.startTransfer(from: 5000, ifRange: "\"v1\"")])
        // The server honours the range: the partial body stays.
        #expect(machine.headReceived(status: 206, validator: "\"v1\"").isEmpty && machine.bytes == 5000)
        // Bytes without a validator cannot be resumed safely: start over.
        var unvalidated = Machine(phase: .queued, bytes: 4096, validator: nil, attempts: 0)
        #expect(unvalidated.start() == [.truncateFile, .startTransfer(from: 0, ifRange: nil)] && unvalidated.bytes == 0)
        // Suspended while running: stopped, queued again with its bytes and attempt count.
        var suspended = Machine(phase: .queued, bytes: 10, validator: "\"v\"", attempts: 0)
        _ = suspended.start()
        #expect(suspended.interrupted() == [.cancelTransfer] && suspended.phase == .queued && suspended.attempts == 0 && suspended.bytes == 10)
        // Or it changed and sends the whole body: the file is emptied.
        var changed = Machine(phase: .queued, bytes: 4096, validator: "\"v1\"", attempts: 1)
        _ = changed.start()
        #expect(changed.headReceived(status: 200, validator: "\"v2\"") == [.truncateFile])
        #expect(changed.bytes == 0 && changed.validator == "\"v2\"")
        // Recovered in other phases, the machine says what to do again.
        var asking = Machine(phase: .askingToBegin, bytes: 0, validator: nil, attempts: 0)
        #expect(asking.recovered(now: Self.t0) == [.askAppToBegin])
        var finished = Machine(phase: .finished(.failed(reason: "x")), bytes: 0, validator: nil, attempts: 6)
        #expect(finished.recovered(now: Self.t0) == [.deliverEvents])
    }

    @Test("Network errors retry 5 times from 30 s doubling, Retry-After within bounds, then the task fails with the last error")
    func retries() {
        var machine = Machine(earliestBeginDate: nil, now: Self.t0)
        var now = Self.t0
        var delays: [TimeInterval] = []
        for _ in 0..<Machine.maximumRetries {
            _ = machine.start()
            let actions = machine.failed(reason: "connection lost", retryable: true, retryAfter: nil, now: now)
            guard case .wake(let date) = actions.first else {
                Issue.record("no retry: \(actions)")
                return
            }
            delays.append(date.timeIntervalSince(now))
            #expect(machine.wake(now: date.addingTimeInterval(-1)) == [.wake(at: date)], "not before its time")
            now = date
            #expect(machine.wake(now: now).isEmpty && machine.phase == .queued)
        }
        #expect(delays == [30, 60, 120, 240, 480])
        _ = machine.start()
        #expect(machine.failed(reason: "connection lost", retryable: true, retryAfter: nil, now: now) == [.deliverEvents])
        #expect(machine.phase == .finished(.failed(reason: "connection lost")) && machine.attempts == 6)
        // Retry-After is honoured, within 1 s ... 1 h; a non-network error is not retried.
        for (asked, expected) in [(5.0, 5.0), (0.0, 1.0), (86_400.0, 3600.0)] {
            var server = Machine(earliestBeginDate: nil, now: Self.t0)
            _ = server.start()
            #expect(server.failed(reason: "503", retryable: true, retryAfter: asked, now: Self.t0) == [.wake(at: Self.t0.addingTimeInterval(expected))])
        }
        var fatal = Machine(earliestBeginDate: nil, now: Self.t0)
        _ = fatal.start()
        #expect(fatal.failed(reason: "unsupported URL", retryable: false, retryAfter: nil, now: Self.t0) == [.deliverEvents])
    }

    @Test("earliestBeginDate: the task waits, the app is asked, and may let it go or cancel it")
    func delayedBegin() {
        let begin = Self.t0.addingTimeInterval(600)
        var machine = Machine(earliestBeginDate: begin, now: Self.t0)
        #expect(machine.phase == .waitingForBeginDate(begin) && machine.initialActions == [.wake(at: begin)])
        #expect(machine.start().isEmpty, "it does not start before its date")
        #expect(machine.wake(now: begin) == [.askAppToBegin] && machine.phase == .askingToBegin)
        #expect(machine.answerBegin(.proceed).isEmpty && machine.phase == .queued)
        var refused = Machine(earliestBeginDate: begin, now: Self.t0)
        _ = refused.wake(now: begin)
        #expect(refused.answerBegin(.cancel) == [.deliverEvents] && refused.phase == .finished(.cancelled))
        // A date already past queues the task at once.
        #expect(Machine(earliestBeginDate: Self.t0.addingTimeInterval(-1), now: Self.t0).phase == .queued)
    }

    @Test("Cancel: a running transfer is stopped; every unfinished phase ends cancelled with its events to deliver")
    func cancelling() {
        var running = Machine(earliestBeginDate: nil, now: Self.t0)
        _ = running.start()
        #expect(running.cancel() == [.cancelTransfer, .deliverEvents])
        var waiting = Machine(earliestBeginDate: Self.t0.addingTimeInterval(60), now: Self.t0)
        #expect(waiting.cancel() == [.deliverEvents] && waiting.phase == .finished(.cancelled))
        // Events from a transfer that is no longer running change nothing.
        #expect(waiting.completed(status: 200).isEmpty && waiting.headReceived(status: 200, validator: nil).isEmpty)
        waiting.wrote(10)
        #expect(waiting.bytes == 0)
    }

    @Test("Numbers from the journal or the network are clamped: negative counts, byte totals past Int64.max")
    func hostileNumbers() {
        var machine = Machine(phase: .running(attempt: 1), bytes: -5, validator: nil, attempts: -2)
        #expect(machine.bytes == 0 && machine.attempts == 0)
        machine.wrote(Int64.max)
        machine.wrote(Int64.max)
        #expect(machine.bytes == Int64.max)
        machine.wrote(-100)
        #expect(machine.bytes == Int64.max)
    }
}
