import Transport

/// One request of a task and its answer: the first, then one for each
/// redirect followed, challenge answered or upload resumed. It is the
/// transport's observer of the request's transfer (and of the transfer that
/// starts again after a wait: a body stream, the server's trust, a client
/// certificate, connectivity, an identical request in flight).
///
/// The task's machine holds its current hop, and only while the task runs.
/// A hop the task moved past still hears its transfer's last events (a
/// transfer cut short by a redirect ends after the next hop began); the
/// task's entry for each event asks `StateMachine.isCurrent` once, in the
/// event's turn of the task's lock, and an earlier hop's event goes no
/// further than that (its figures still reach the hop's metrics).
final class Hop: TransferObserver, Equatable {
    /// The task whose request this is: kept while the transport holds the
    /// hop, so that a task nobody else holds still hears its transfer's end.
    let task: SessionTask
    /// Its place among the task's requests, from 0: the slot of its
    /// exchange in the task's metrics.
    let index: Int

    init(task: SessionTask, index: Int) {
        self.task = task
        self.index = index
    }

    /// The task's first request: the only one that consults the cache,
    /// falls back to a stale entry, and always sends the task's body.
    var isFirst: Bool { index == 0 }

    /// The request that follows this one (a redirect, a challenge's answer, a resumption).
    func next() -> Hop { Hop(task: task, index: index + 1) }

    /// The same hop: hops are compared by identity.
    static func == (a: Hop, b: Hop) -> Bool { a === b }

    // MARK: TransferObserver (on the transport's thread)

    func transferDidReceiveHead(_ head: ResponseHead) { task.received(head, from: self) }
    func transferDidReceiveInterimHead(_ head: ResponseHead) { task.receivedInterim(head, from: self) }
    func transferDidReceiveTrailers(_ fields: [(name: String, value: String)]) { task.receivedTrailers(fields, from: self) }
    func transferDidReceive(_ chunk: UnsafeRawBufferPointer) -> Bool { task.received(chunk, from: self) }
    func transferDidSendBody(sent: Int64, total: Int64) { task.sent(sent, total: total, from: self) }
    func transferMayProceedPastHead() -> Bool { task.mayProceedPastHead(of: self) }

    func transferWasCancelled(after metrics: TransferMetrics) {
        onCompletionContext { [self] in task.cancelled(after: metrics, of: self) }
    }

    func transferDidComplete(_ result: Result<TransferMetrics, TransferError>) {
        onCompletionContext { [self] in task.completed(result, of: self) }
    }

    /// The async APIs run a transfer's end on the awaiting task: the
    /// transport's one thread carries every transfer. Others run it here.
    private func onCompletionContext(_ work: @escaping @Sendable () -> Void) {
        if let runner = task.completionRunner { runner(work) } else { work() }
    }
}
