/// Apple's `URLSessionDataTask`: every task here is a `SessionTask`, whose
/// `kind` says what it is. The names exist so that ported declarations
/// (`let task: SessionDataTask`, delegate methods taking `dataTask:
/// SessionDataTask`) compile as they did.
public typealias SessionDataTask = SessionTask
/// Apple's `URLSessionUploadTask` (see `SessionDataTask`).
public typealias SessionUploadTask = SessionTask
/// Apple's `URLSessionDownloadTask` (see `SessionDataTask`).
public typealias SessionDownloadTask = SessionTask

extension SessionTask {
    /// Apple's `URLSessionTask.defaultPriority`.
    public static let defaultPriority: Float = 0.5
    /// Apple's `URLSessionTask.lowPriority`.
    public static let lowPriority: Float = 0.25
    /// Apple's `URLSessionTask.highPriority`.
    public static let highPriority: Float = 0.75
}
