import Foundation
import Transport

/// `.becomeStream`: a data task whose delegate may ask
/// for it runs on a connection of the session's own, which it hands to a
/// new stream task after the head.
extension SessionTask {
    /// Whether this hop goes on a connection of the session's own: a data
    /// task whose delegate says it may become a stream (`mayBecomeStream`),
    /// or one asking for a protocol `Upgrade` that a delegate hears.
    func runsOnOwnConnection(_ transfer: TransferRequest, kind: Kind, taskDelegate task: (any SessionDelegate)?, session: Session) -> Bool {
        guard kind == .data else { return false }
        let sessionDelegate = session.delegate
        if task?.mayBecomeStream == true || sessionDelegate?.mayBecomeStream == true { return true }
        let upgrades = transfer.headers.contains { $0.name.caseInsensitiveCompare("Upgrade") == .orderedSame && !$0.value.isEmpty }
        return upgrades && (task != nil || sessionDelegate != nil)
    }

    /// The transport asks, right after the head, whether the rest may come:
    /// not before the task decided (the delegate may want the connection).
    func mayProceedPastHead(of hop: Hop) -> Bool {
        locked.withLock { !$0.machine.isCurrent(hop) || $0.machine.chunk() }
    }

    /// The delegate answered `.becomeStream`: the connection, from right
    /// after the head, goes to a new stream task; the data task ends without
    /// another call.
    func becomeStream(url: URL, session: Session) {
        let transfer = locked.withLock { $0.machine.currentTransfer }
        guard let transfer, let (plan, connection, leftover) = session.ownedTransfers.handOver(transfer) else {
            let message =
                "becomeStream needs the task on a connection of the session's own: a delegate whose mayBecomeStream is true, or a request asking for an Upgrade"
            perform(locked.withLock { $0.machine.fail(SessionError(.unknown, failingURL: url, message: message)) })
            return
        }
        let stream = session.adoptStreamTask(
            host: plan.endpoint.host, port: plan.endpoint.port, endpoint: plan.endpoint, connection: connection, leftover: leftover)
        callDelegate { $0.urlSession(session, dataTask: self, didBecome: stream) }
        perform(
            locked.withLock { $0.machine.becameStream() })
    }
}
