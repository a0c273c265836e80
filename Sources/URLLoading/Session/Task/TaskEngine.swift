import Foundation

/// What runs a task's work. `SessionTask` is the handle users hold (its
/// identity, the properties they set, its progress); its controls go to
/// the engine it was made with: this process's (`LocalEngine`: libcurl's
/// loops or the session's own connections) or another process's (a
/// background session's, whose transfers run in transferd).
///
/// An engine never holds a lock of its own while it takes the task's.
package protocol TaskEngine: Sendable {
    /// Starts the task, or continues a suspended one.
    func resume(_ task: SessionTask)
    /// Pauses the task: no more body bytes are taken until `resume`.
    func suspend(_ task: SessionTask)
    /// Cancels the task: it completes with `cancelled`.
    func cancel(_ task: SessionTask)
    /// Whether the task runs although this process's part of it waits (its
    /// transfer runs in another process): its state is then `running`.
    var isRunningElsewhere: Bool { get }
    /// The delegate returned from the task's last call (`didCompleteWithError`).
    func completionDelivered(_ task: SessionTask)
}

/// The engine of a task whose transfers run in this process: the task's
/// state machine, under the task's lock, decides; the transport carries
/// the hops.
package final class LocalEngine: TaskEngine {
    /// It keeps no state of its own (the task's machine does): one serves every task.
    package static let shared = LocalEngine()

    private init() {}

    package func resume(_ task: SessionTask) {
        // Before any request of the task can go out (it carries the span's context).
        task.trace?.start(task.originalRequest)
        // The first hop's start reads the task in the same turn of the lock.
        let (actions, context) = task.locked.withLock { inner -> (SessionTask.StateMachine.Actions, SessionTask.StartContext?) in
            let now = Date()
            if inner.started == nil { inner.started = now }
            let actions = inner.machine.resume(
                at: now, earliestBegin: inner.earliestBeginDate, resourceTimeout: inner.session?.settings.timeoutIntervalForResource)
            guard actions.count == 1, case .runInterceptors = actions[0] else { return (actions, nil) }
            return (actions, SessionTask.StartContext(&inner))
        }
        if let context { task.runInterceptors(context) } else { task.perform(actions) }
    }

    package func suspend(_ task: SessionTask) {
        task.locked.withLock { $0.machine.suspend() }
    }

    package func cancel(_ task: SessionTask) {
        task.perform(task.locked.withLock { $0.machine.cancel() })
    }

    package var isRunningElsewhere: Bool { false }

    package func completionDelivered(_ task: SessionTask) {}
}
