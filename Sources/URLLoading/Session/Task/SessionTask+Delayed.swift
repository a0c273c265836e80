import Dispatch
public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

extension Session {
    /// What a delayed task does when its begin date comes (Apple's
    /// `URLSession.DelayedRequestDisposition`).
    public enum DelayedRequestDisposition: Sendable, Equatable {
        /// Start with the request as it is.
        case continueLoading
        /// Start with the request the delegate gives instead.
        case useNewRequest
        /// Cancel the task (it completes with `.cancelled`).
        case cancel
    }
}

extension SessionDelegate {
    public func urlSession(_ session: Session, task: SessionTask, willBeginDelayedRequest request: URLRequest) async
        -> (Session.DelayedRequestDisposition, URLRequest?)
    {
        await awaitingAnswer { self.urlSession(session, task: task, willBeginDelayedRequest: request, completionHandler: $0) }
    }

    public func urlSession(
        _ session: Session, task: SessionTask, willBeginDelayedRequest request: URLRequest,
        completionHandler: @escaping @Sendable (Session.DelayedRequestDisposition, URLRequest?) -> Void
    ) {
        DelegateFallback.unhandled()
        completionHandler(.continueLoading, nil)
    }
}

extension SessionTask {
    /// The task does not start before this date (Apple's `earliestBeginDate`;
    /// Apple honours it in background sessions only, we in every session):
    /// resumed earlier, it waits, then asks its delegate
    /// `urlSession(_:task:willBeginDelayedRequest:)`. Set it before `resume()`.
    public var earliestBeginDate: Date? {
        get { locked.withLock { $0.earliestBeginDate } }
        set { locked.withLock { $0.earliestBeginDate = newValue } }
    }

    /// Waits for the begin date off every thread of ours, then goes on on
    /// the task's own context.
    func awaitBeginDate() {
        let delay = max(0, (locked.withLock { $0.earliestBeginDate } ?? Date()).timeIntervalSinceNow)
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [self] in
            events.enqueue { [self] in await self.beginDelayedRequest() }
        }
    }

    private func beginDelayedRequest() async {
        // A task cancelled while it waited is finished already.
        guard let session, let request = currentRequest, locked.withLock({ $0.machine.phase == .delayed }) else { return }
        let (disposition, replacement) =
            await askDelegate { await $0.urlSession(session, task: self, willBeginDelayedRequest: request) } ?? (.continueLoading, nil)
        switch disposition {
        case .cancel:
            cancel()
        case .useNewRequest, .continueLoading:
            let replacement = disposition == .useNewRequest ? replacement : nil
            perform(locked.withLock { $0.machine.beginDelayed(with: replacement) })
        }
    }
}
