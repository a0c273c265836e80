import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Transport

/// Another process that runs a session's transfers (a background
/// session's transferd): the session makes its tasks' engines there and
/// lets it adopt the tasks it already has; what it says comes back as the
/// tasks' delegate calls.
protocol RemoteTaskHost: Sendable {
    /// Why the session's tasks cannot run there (no delegate, the host not
    /// reachable, the identifier in use by another process); each new task
    /// fails with it.
    var failure: SessionError? { get }
    /// The first task identifier the host has not used.
    var firstTaskIdentifier: Int { get }
    /// The engine of a new task, or why the host cannot run it.
    func engine(
        kind: SessionTask.Kind, request: URLRequest, body: TransferRequest.Body, sink: any ResponseSink, session: Session
    ) -> Result<any TaskEngine, SessionError>
    /// The session is made: the tasks the host already has become its
    /// tasks, and the host's messages start to reach it.
    func start(_ session: Session)
    /// The session ends: the host keeps its unfinished tasks for the next one.
    func close()
}
