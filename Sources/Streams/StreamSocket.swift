import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Opening a TCP connection: the host's addresses in turn, each connect
/// bounded by the deadline, and a proxy's tunnel (`StreamProxy`) when
/// the session names one. `connect` blocks (it runs on a connecting
/// thread, `StreamConnector`); a direct connection's loop uses the
/// pieces instead (`resolve` on a connecting thread, then `begin` and
/// `outcome` without waiting).
enum StreamSocket {
    /// A connected, non-blocking socket to `host`:`port` (through `proxy`).
    static func connect(host: String, port: Int, proxy: URL?, deadline: ContinuousClock.Instant) throws(StreamError) -> Int32 {
        try check(host: host, port: port)
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

    /// Refuses a port outside 1…65535 and an empty or malformed host name.
    static func check(host: String, port: Int) throws(StreamError) {
        guard (1...65535).contains(port) else { throw StreamError(.cannotConnect, "the port \(port) is outside 1…65535") }
        guard !host.isEmpty, !host.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else { throw StreamError(.cannotFindHost, "an empty or malformed host name") }
    }

    /// One address a name resolved to.
    struct Address {
        let family: Int32
        let type: Int32
        let proto: Int32
        /// The `sockaddr`'s bytes.
        let bytes: [UInt8]
    }

    /// The addresses of `host`, in the resolver's order. Blocking.
    static func resolve(host: String, port: Int) throws(StreamError) -> [Address] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &found)
        guard status == 0, let first = found else {
            throw StreamError(.cannotFindHost, "cannot resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(first) }
        var addresses: [Address] = []
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let address = entry {
            entry = address.pointee.ai_next
            guard let raw = address.pointee.ai_addr, address.pointee.ai_addrlen > 0 else { continue }
            let bytes = [UInt8](UnsafeRawBufferPointer(start: UnsafeRawPointer(raw), count: Int(address.pointee.ai_addrlen)))
            addresses.append(Address(family: address.pointee.ai_family, type: address.pointee.ai_socktype, proto: address.pointee.ai_protocol, bytes: bytes))
        }
        guard !addresses.isEmpty else { throw StreamError(.cannotFindHost, "\(host) has no address") }
        return addresses
    }

    /// A connect to one address begun on a new non-blocking socket.
    enum Begun {
        /// Under way (or done): the socket becomes writable when it ends.
        case started(Int32)
        case failed(String)
    }

    static func begin(_ address: Address) -> Begun {
        let descriptor = socket(address.family, address.type | Int32(SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return .failed(String(cString: strerror(errno))) }
        let result = address.bytes.withUnsafeBytes { raw -> Int32 in
            guard let base = raw.baseAddress else { return -1 }
            return Glibc.connect(descriptor, base.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
        if result == 0 || errno == EINPROGRESS { return .started(descriptor) }
        let reason = String(cString: strerror(errno))
        Glibc.close(descriptor)
        return .failed(reason)
    }

    /// Whether a begun connect that polled writable succeeded: nil, or why not.
    static func outcome(_ descriptor: Int32) -> String? {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else { return String(cString: strerror(errno)) }
        guard error == 0 else { return String(cString: strerror(error)) }
        var one: Int32 = 1
        _ = setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return nil
    }

    /// The addresses in turn, each connect waited for (blocking) within the deadline.
    private static func open(host: String, port: Int, deadline: ContinuousClock.Instant) throws(StreamError) -> Int32 {
        var reason = "no address"
        for address in try resolve(host: host, port: port) {
            switch begin(address) {
            case .failed(let failure): reason = failure
            case .started(let descriptor):
                guard waitFor(descriptor, events: Int16(POLLOUT), deadline: deadline) else {
                    Glibc.close(descriptor)
                    throw StreamError(.timedOut, "connecting to \(host):\(port) timed out")
                }
                guard let failure = outcome(descriptor) else { return descriptor }
                reason = failure
                Glibc.close(descriptor)
            }
        }
        throw StreamError(.cannotConnect, "cannot connect to \(host):\(port): \(reason)")
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
