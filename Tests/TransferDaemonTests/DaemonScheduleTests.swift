import Foundation
import Testing
@testable import TransferDaemon
import URLLoading

/// What transferd starts next: the waiting tasks' index and their order,
/// without reading every record (a pass over the waiting ids).
@Suite struct DaemonScheduleTests {
    static func record(_ id: Int64, discretionary: Bool = false, suspended: Bool = false) -> TransferRecord {
        let spec = TaskSpec(
            task: Int(id), kind: .download, request: RequestSpec(url: "http://example.com/\(id)", method: "GET", headers: [], timeout: 30),
            bodyFile: nil, earliestBeginDate: nil, isDiscretionary: discretionary, taskDescription: nil)
        return TransferRecord(
            id: id, session: "s", spec: spec, machine: BackgroundTransferMachine(earliestBeginDate: nil, now: Date()), suspended: suspended,
            created: Date())
    }

    @Test("Only queued, unsuspended tasks wait for a slot; a task leaves the index when it starts, is suspended or ends")
    func startableIndex() {
        var state = Daemon.State()
        state.put(Self.record(1))
        state.put(Self.record(2, discretionary: true))
        state.put(Self.record(3, suspended: true))
        #expect(state.startable == [1: false, 2: true])
        var started = Self.record(1)
        _ = started.machine.start()
        state.put(started)
        #expect(state.startable == [2: true] && state.records.count == 3)
        var resumed = Self.record(3)
        resumed.suspended = false
        state.put(resumed)
        #expect(state.startable == [2: true, 3: false])
        var cancelled = Self.record(2, discretionary: true)
        _ = cancelled.machine.cancel()
        state.put(cancelled)
        #expect(state.startable == [3: false])
    }

    @Test("A task is found by its session and identifier; once delivered it leaves memory (the journal keeps it), so a long-running daemon holds only what is under way")
    func deliveredLeaveMemory() {
        var state = Daemon.State()
        for id in Int64(1)...1000 { state.put(Self.record(id)) }
        #expect(state.ids["s"]?[7] == 7 && state.ids["other"] == nil)
        for id in Int64(1)...1000 {
            var record = Self.record(id)
            _ = record.machine.start()
            _ = record.machine.completed(status: 200)
            state.put(record)
            #expect(record.machine.acknowledged() == [.removeFiles])
            state.put(record)
        }
        #expect(state.records.isEmpty && state.startable.isEmpty && state.ids.isEmpty)
        state.put(Self.record(1001))
        #expect(state.ids == ["s": [1001: 1001]] && state.records.count == 1)
    }

    @Test("A turn's changes keep each task's last state, in the order tasks first changed, and every change's actions in order")
    func turnPending() {
        var pending = Daemon.Pending()
        #expect(pending.isEmpty)
        pending.act([], on: Self.record(9))
        #expect(pending.isEmpty)
        var first = Self.record(2)
        pending.note(first)
        pending.act(first.machine.start(), on: first)
        var upload = Self.record(1)
        upload.spec.kind = .upload
        pending.note(upload)
        _ = first.machine.completed(status: 200)
        pending.note(first)
        pending.act([.deliverEvents], on: first)
        pending.act([.removeFiles], on: upload)
        #expect(pending.records.map(\.id) == [2, 1])
        #expect(pending.records.first?.machine.isFinished == true)
        #expect(pending.actions.map(\.id) == [2, 2, 1])
        // Which files a task may have depends on its kind.
        #expect(pending.actions.map(\.kind) == [.download, .download, .upload])
        #expect(pending.actions.map(\.actions) == [[.startTransfer(from: 0, ifRange: nil)], [.deliverEvents], [.removeFiles]])
    }

    @Test("Tasks start the app's own before discretionary ones, the oldest first")
    func order() {
        let keys: [(discretionary: Bool, id: Int64)] = [(true, 1), (false, 9), (false, 4), (true, 2), (false, 5)]
        let sorted = keys.sorted(by: Daemon.startsBefore).map(\.id)
        #expect(sorted == [4, 5, 9, 1, 2])
    }
}
