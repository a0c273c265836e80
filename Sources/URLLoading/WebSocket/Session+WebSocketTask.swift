public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import Transport

extension Session {
    /// A WebSocket task for a `ws:` or `wss:` URL (Apple's
    /// `webSocketTask(with:)`), connected at `resume()`.
    public func webSocketTask(with url: URL) -> SessionWebSocketTask {
        webSocketTask(with: URLRequest(url: url), protocols: [])
    }

    /// A WebSocket task offering `protocols` (`Sec-WebSocket-Protocol`).
    public func webSocketTask(with url: URL, protocols: [String]) -> SessionWebSocketTask {
        webSocketTask(with: URLRequest(url: url), protocols: protocols)
    }

    /// A WebSocket task for `request` (its header fields go with the
    /// handshake; `Sec-WebSocket-Protocol` among them names the protocols offered).
    public func webSocketTask(with request: URLRequest) -> SessionWebSocketTask {
        let offered = request.value(forHTTPHeaderField: "Sec-WebSocket-Protocol").map {
            FieldList.members($0).map(String.init)
        }
        return webSocketTask(with: request, protocols: offered ?? [])
    }

    private func webSocketTask(with request: URLRequest, protocols: [String]) -> SessionWebSocketTask {
        let url = request.url
        let scheme = url?.scheme?.lowercased() ?? ""
        let secure = scheme == "wss" || scheme == "https"
        let host = url?.host(percentEncoded: false) ?? ""
        let port = url?.port ?? (secure ? 443 : 80)
        let (task, refused) = state.withLock { state -> (SessionWebSocketTask, Bool) in
            let task = SessionWebSocketTask(
                session: self, identifier: state.nextIdentifier, request: request, protocols: protocols, endpoint: streamEndpoint(host: host, port: port, secure: secure))
            state.nextIdentifier += 1
            state.webSocketTasks[task.taskIdentifier] = task
            return (task, state.invalidating || state.invalidated)
        }
        if refused {
            task.cancel()
        } else if !["ws", "wss", "http", "https"].contains(scheme) || host.isEmpty {
            task.end(SessionError(.unsupportedURL, failingURL: url, message: "a WebSocket task needs a ws: or wss: URL with a host"))
        }
        return task
    }

    /// A WebSocket task ended: the session lets go of it.
    func webSocketTaskEnded(_ identifier: Int) {
        otherTaskEnded(webSocket: identifier)
    }
}
