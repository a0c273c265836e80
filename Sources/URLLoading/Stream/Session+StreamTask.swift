import Foundation
import Streams

/// A stream task as its own closures hold it: weakly, so that the
/// operations it queued do not keep it alive.
struct WeakStreamTask: Sendable {
    weak var task: SessionStreamTask?
}

extension Session {
    /// A TCP connection to `hostname`:`port` (Apple's
    /// `streamTask(withHostName:port:)`), opened at `resume()`. The
    /// session's proxy (the one its rules choose for an `https` URL to the
    /// host: a tunnel carries anything), trusted roots, TLS versions and
    /// `timeoutIntervalForRequest` (as the connect bound) apply.
    public func streamTask(withHostName hostname: String, port: Int) -> SessionStreamTask {
        let endpoint = streamEndpoint(host: hostname, port: port, secure: true)
        let (task, cancelled) = state.withLock { state -> (SessionStreamTask, Bool) in
            let task = SessionStreamTask(session: self, identifier: state.nextIdentifier, host: hostname, port: port, endpoint: endpoint)
            state.nextIdentifier += 1
            state.streamTasks[task.taskIdentifier] = task
            return (task, state.invalidating || state.invalidated)
        }
        // A session being invalidated runs no new task.
        if cancelled { task.cancel() }
        return task
    }

    func cancelStreamTasks() {
        let (tasks, webSockets) = state.withLock { state in
            defer {
                state.streamTasks = [:]
                state.webSocketTasks = [:]
            }
            return (Array(state.streamTasks.values), Array(state.webSocketTasks.values))
        }
        tasks.forEach { $0.cancel() }
        webSockets.forEach { $0.cancel() }
    }

    /// Where a stream (or WebSocket) task connects: the proxy the
    /// session's rules choose for an `http` (or, `secure`, an `https`) URL
    /// to the host — its `proxyURL`, its dictionary's, its environment's,
    /// with their exceptions —, trusted roots, TLS versions, and
    /// `timeoutIntervalForRequest` as the connect bound.
    func streamEndpoint(host: String, port: Int, secure: Bool) -> StreamConnection.Endpoint {
        let authority = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        let proxy = URL(string: "\(secure ? "https" : "http")://\(authority):\(port)/").flatMap { settings.proxyAsURL(for: $0) }
        return Self.streamEndpoint(host: host, port: port, proxy: proxy, settings: settings)
    }

    /// Where a connection of the session's own to `host` and `port` goes,
    /// through `proxy`, by `settings`.
    static func streamEndpoint(host: String, port: Int, proxy: URL?, settings: SessionConfiguration.Values) -> StreamConnection.Endpoint {
        StreamConnection.Endpoint(
            host: host, port: port, proxy: proxy,
            tls: TLSOptions(
                rootsFile: settings.trustRootsFile, minimumVersion: settings.tlsMinimumSupportedVersion,
                maximumVersion: settings.tlsMaximumSupportedVersion),
            connectTimeout: .milliseconds(Int64(min(max(settings.timeoutIntervalForRequest, 0.001), 31_536_000) * 1000)))
    }

    /// A stream task ended: the session lets go of it.
    func streamTaskEnded(_ identifier: Int) {
        otherTaskEnded(stream: identifier)
    }
}

extension Session {
    /// A stream task on a connection a data task handed over (`becomeStream`).
    func adoptStreamTask(host: String, port: Int, endpoint: StreamConnection.Endpoint, connection: StreamConnection, leftover: [UInt8]) -> SessionStreamTask {
        state.withLock { state in
            let task = SessionStreamTask(
                session: self, identifier: state.nextIdentifier, host: host, port: port, endpoint: endpoint, connection: connection,
                leftover: leftover)
            state.nextIdentifier += 1
            state.streamTasks[task.taskIdentifier] = task
            return task
        }
    }
}
