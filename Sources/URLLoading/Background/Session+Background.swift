import Foundation

extension Session {
    /// The identifier a process was started with by `transferd` for launch
    /// events (Apple's `application(_:handleEventsForBackgroundURLSession:)`
    /// role): make a background session with it and its events arrive,
    /// then `urlSessionDidFinishEvents(forBackgroundURLSession:)`.
    public static var launchedForBackgroundSession: String? {
        ProcessInfo.processInfo.environment["URLLOADING_BACKGROUND_SESSION"].flatMap { $0.isEmpty ? nil : $0 }
    }
}

extension SessionConfiguration.Values {
    /// A background configuration's host: transferd, attached (started if
    /// needed) under the session's identifier; nil for other configurations.
    ///
    /// - Parameter credentialStore: The folder of the session's persistent
    ///   credential store: transferd answers challenges from it when no app is attached.
    func remoteTaskHost(delegate: (any SessionDelegate)?, credentialStore: String?) -> (any RemoteTaskHost)? {
        guard case .background(let identifier) = kind else { return nil }
        guard delegate != nil else {
            return BackgroundHost(
                failure: SessionError(
                    .notSupportedInBackground, failingURL: nil, message: "a background session needs a delegate: its events arrive only there"),
                settings: self)
        }
        // Only a command the app named: a program not written for launch
        // events, run again with its own arguments, would repeat its action.
        let command = sessionSendsLaunchEvents ? launchCommand : nil
        do throws(SessionError) {
            let (link, attached) = try BackgroundLink.attach(identifier: identifier, launchCommand: command, credentialStore: credentialStore)
            return BackgroundHost(link: link, attached: attached, settings: self)
        } catch {
            return BackgroundHost(failure: error, settings: self)
        }
    }
}
