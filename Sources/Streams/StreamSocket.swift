import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Opening a TCP connection: the host's addresses in turn, each connect
/// bounded by the deadline, and a proxy's tunnel (`StreamProxy`) when
/// the session names one. Blocking: runs on the connecting thread (`StreamConnector`).
enum StreamSocket {
    /// A connected, non-blocking socket to `host`:`port` (through `proxy`).
    static func connect(host: String, port: Int, proxy: URL?, deadline: ContinuousClock.Instant) throws(StreamError) -> Int32 {
        guard (1...65535).contains(port) else { throw StreamError(.cannotConnect, "the port \(port) is outside 1…65535") }
        guard !host.isEmpty, !host.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else { throw StreamError(.cannotFindHost, "an empty or malformed host name") }
        guard let proxy else { return try open(host: host, port: port, deadline: deadline) }
        let kind = try StreamProxy.Kind(proxy)
        guard let proxyHost = proxy.host(percentEncoded: false), !proxyHost.isEmpty else { throw StreamError(.proxy, "the proxy's URL has no host") }
        let descriptor = try open(host: proxyHost, port: proxy.port ?? kind.defaultPort, deadline: deadline)
        do {
            try StreamProxy.through(descriptor, kind: kind, proxy: proxy, to: host, port: port, deadline: deadline)
        } catch {
            Glibc.close(descriptor)
            throw error
        }
        return descriptor
    }

    private static func open(host: String, port: Int, deadline: ContinuousClock.Instant) throws(StreamError) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &found)
        guard status == 0, let first = found else {
            throw StreamError(.cannotFindHost, "cannot resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(first) }
        var reason = "no address"
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let address = entry {
            entry = address.pointee.ai_next
            let descriptor = socket(address.pointee.ai_family, address.pointee.ai_socktype | Int32(SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else {
                reason = String(cString: strerror(errno))
                continue
            }
            if Glibc.connect(descriptor, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 || errno == EINPROGRESS {
                if let failure = finishConnect(descriptor, deadline: deadline) {
                    reason = failure
                    Glibc.close(descriptor)
                    if failure == "timed out" { throw StreamError(.timedOut, "connecting to \(host):\(port) timed out") }
                    continue
                }
                var one: Int32 = 1
                _ = setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                return descriptor
            }
            reason = String(cString: strerror(errno))
            Glibc.close(descriptor)
        }
        throw StreamError(.cannotConnect, "cannot connect to \(host):\(port): \(reason)")
    }

    /// Waits for a non-blocking connect; the failure's reason, or nil.
    private static func finishConnect(_ descriptor: Int32, deadline: ContinuousClock.Instant) -> String? {
        guard waitFor(descriptor, events: Int16(POLLOUT), deadline: deadline) else { return "timed out" }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else { return String(cString: strerror(errno)) }
        return error == 0 ? nil : String(cString: strerror(error))
    }

    /// Polls one descriptor until `events` or the deadline; false at the deadline.
    static func waitFor(_ descriptor: Int32, events: Int16, deadline: ContinuousClock.Instant) -> Bool {
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { return false }
            var entry = pollfd(fd: descriptor, events: events, revents: 0)
            let result = poll(&entry, 1, milliseconds(left))
            if result > 0 { return true }
            if result < 0, errno != EINTR { return true }
        }
    }

    /// A poll timeout for `duration`, rounded up, at most a day.
    static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        guard seconds < 86_400 else { return 86_400_000 }
        return Int32(max(0, seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000))
    }
}
