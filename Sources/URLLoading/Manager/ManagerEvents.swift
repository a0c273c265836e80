public import Foundation

/// What a manager's tasks and session go through (AFNetworking's
/// `AFNetworkingTaskDidResumeNotification` role). Every method has a no-op
/// default, so a monitor implements what it needs; several monitors can
/// watch one manager. Calls come on the thread that saw the event: keep
/// them short.
public protocol ManagerEventMonitor: Sendable {
    /// The manager resumed a task (at its start, or its `Progress` resumed it).
    func session(_ session: Session, taskDidResume task: SessionTask)
    /// A task's `Progress` paused it.
    func session(_ session: Session, taskDidSuspend task: SessionTask)
    /// A task ended (`error` nil on success as the transport saw it; the
    /// serializer's verdict comes to the success and failure closures).
    func session(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?)
    /// The session became invalid.
    func session(_ session: Session, didBecomeInvalidWithError error: (any Error)?)
}

extension ManagerEventMonitor {
    public func session(_ session: Session, taskDidResume task: SessionTask) {}
    public func session(_ session: Session, taskDidSuspend task: SessionTask) {}
    public func session(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {}
    public func session(_ session: Session, didBecomeInvalidWithError error: (any Error)?) {}
}

extension Notification.Name {
    /// A manager resumed a task; the notification's object is the task.
    public static let managerTaskDidResume = Notification.Name("URLLoading.HTTPSessionManager.taskDidResume")
    /// A task's `Progress` suspended it; the object is the task.
    public static let managerTaskDidSuspend = Notification.Name("URLLoading.HTTPSessionManager.taskDidSuspend")
    /// A manager's task ended; the object is the task, `userInfo["error"]` the error if any.
    public static let managerTaskDidComplete = Notification.Name("URLLoading.HTTPSessionManager.taskDidComplete")
    /// A manager's session became invalid; the object is the session.
    public static let managerSessionDidInvalidate = Notification.Name("URLLoading.HTTPSessionManager.sessionDidInvalidate")
}

/// Posts to `NotificationCenter.default` and calls every monitor, in that order.
struct ManagerEvents: Sendable {
    let monitors: [any ManagerEventMonitor]

    func resumed(_ task: SessionTask, session: Session) {
        NotificationCenter.default.post(name: .managerTaskDidResume, object: task)
        for monitor in monitors { monitor.session(session, taskDidResume: task) }
    }

    func suspended(_ task: SessionTask, session: Session) {
        NotificationCenter.default.post(name: .managerTaskDidSuspend, object: task)
        for monitor in monitors { monitor.session(session, taskDidSuspend: task) }
    }

    func completed(_ task: SessionTask, session: Session, error: (any Error)?) {
        NotificationCenter.default.post(name: .managerTaskDidComplete, object: task, userInfo: error.map { ["error": $0] })
        for monitor in monitors { monitor.session(session, task: task, didCompleteWithError: error) }
    }

    func invalidated(_ session: Session, error: (any Error)?) {
        NotificationCenter.default.post(name: .managerSessionDidInvalidate, object: session, userInfo: error.map { ["error": $0] })
        for monitor in monitors { monitor.session(session, didBecomeInvalidWithError: error) }
    }
}
