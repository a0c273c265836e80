import Dispatch
import Foundation
import Locking
import Testing
import TestSupport
@testable import TransferDaemon
import URLLoading

/// What transfers' contexts hand to the daemon's owner (ends, progress, an
/// upload's resumption URL) runs in arrival order, however the owner's
/// queue was busy.
@Suite struct DaemonArrivalsTests {
    static func upload(task: Int) -> TransferRecord {
        let spec = TaskSpec(
            task: task, kind: .upload, request: RequestSpec(url: "http://example.test/\(task)", method: "PUT", headers: [], timeout: 30),
            bodyFile: "/nonexistent", earliestBeginDate: nil, isDiscretionary: false, taskDescription: nil)
        return TransferRecord(
            id: 0, session: "s", spec: spec, machine: BackgroundTransferMachine(earliestBeginDate: nil, now: Date()), suspended: false,
            created: Date())
    }

    @Test("An upload's resumption URL, named before its transfer failed, is kept for the retry even when other transfers' ends were queued first")
    func resumptionBeforeTheEnd() throws {
        let directory = TemporaryDirectory()
        let paths = BackgroundPaths(environment: [
            "XDG_RUNTIME_DIR": directory.path("run"), "XDG_DATA_HOME": directory.path("data"), "XDG_STATE_HOME": directory.path("state"),
        ])
        var settings = Daemon.Settings()
        settings.firstRetryDelay = 3600  // the retry stays ahead: nothing starts a real transfer
        let daemon = try Daemon(paths: paths, settings: settings)
        // Two running uploads, as if started.
        var ids: [Int64] = []
        for task in [1, 2] {
            var record = try daemon.journal.insert(Self.upload(task: task))
            _ = record.machine.start()
            daemon.state.withLock { state in
                state.put(record)
                state.running[record.id] = RunningTransfer(id: record.id, kind: .upload, descriptor: -1, offset: 0)
            }
            ids.append(record.id)
        }
        let (other, upload) = (ids[0], ids[1])
        // The owner is busy; meanwhile the other transfer ends, then this
        // upload's server names its resumption URL, then its connection drops.
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        daemon.owner.async {
            holding.signal()
            _ = release.wait(timeout: .now() + 30)
        }
        #expect(holding.wait(timeout: .now() + 30) == .success)
        let lost = SessionError(.networkConnectionLost, failingURL: nil, message: "reset").urlError
        daemon.transferEnded(other, bytes: 0, error: lost, body: nil)
        let blob = Data("{\"resumptionURL\":\"http://example.test/uploads/2\"}".utf8)
        daemon.uploadResumable(upload, blob)
        daemon.transferEnded(upload, bytes: 10, error: lost, body: nil)
        release.signal()
        daemon.owner.sync {}
        let kept = daemon.state.withLock { $0.records[upload] }
        #expect(kept?.machine.isFinished == false, "the upload did not wait to retry: \(String(describing: kept?.machine.phase))")
        #expect(kept?.uploadResume == blob, "the resumption URL was lost: the retry would send the whole body again")
        #expect(try Journal(path: paths.journal).records().first { $0.id == upload }?.uploadResume == blob)
    }
}
