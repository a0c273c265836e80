import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A tunnel through a proxy on a connected socket, before the stream's own
/// bytes: an HTTP proxy's `CONNECT` (RFC 9110 §9.3.6) with Basic
/// credentials from the proxy's URL, or a SOCKS5 proxy's `CONNECT` (RFC
/// 1928) with its user name and password (RFC 1929); `socks5h` leaves the
/// name to the proxy, `socks5` sends an address resolved here. Nothing
/// past the proxy's answer is read. Blocking, bounded by the deadline: runs
/// on the connecting thread (`StreamConnector`). Errors never quote the credentials.
enum StreamProxy {
    enum Kind: Equatable {
        case http
        /// `resolvesNames`: `socks5h`, the proxy resolves the host's name.
        case socks5(resolvesNames: Bool)

        init(_ proxy: URL) throws(StreamError) {
            switch proxy.scheme?.lowercased() {
            case "http": self = .http
            case "socks5": self = .socks5(resolvesNames: false)
            case "socks5h": self = .socks5(resolvesNames: true)
            case let other:
                throw StreamError(.proxy, "a stream cannot go through a \(other ?? "schemeless") proxy: http, socks5 and socks5h can carry one")
            }
        }

        var defaultPort: Int { self == .http ? 80 : 1080 }
    }

    static func through(
        _ descriptor: Int32, kind: Kind, proxy: URL, to host: String, port: Int, deadline: ContinuousClock.Instant
    ) throws(StreamError) {
        let user = proxy.user(percentEncoded: false)
        let credentials = user.map { ($0, proxy.password(percentEncoded: false) ?? "") }
        switch kind {
        case .http: try connectTunnel(descriptor, to: host, port: port, credentials: credentials, deadline: deadline)
        case .socks5(let resolvesNames):
            try socks5(descriptor, to: host, port: port, resolvesNames: resolvesNames, credentials: credentials, deadline: deadline)
        }
    }

    // MARK: HTTP

    /// `CONNECT host:port`, a 2xx head, nothing after it.
    private static func connectTunnel(
        _ descriptor: Int32, to host: String, port: Int, credentials: (String, String)?, deadline: ContinuousClock.Instant
    ) throws(StreamError) {
        let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        var request = "CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n"
        if let (user, password) = credentials {
            request += "Proxy-Authorization: Basic \(Data("\(user):\(password)".utf8).base64EncodedString())\r\n"
        }
        try send(descriptor, Array((request + "\r\n").utf8), deadline: deadline)
        // Byte by byte, so that nothing past the head is taken from the tunnel.
        var head: [UInt8] = []
        while !(head.count >= 4 && head[(head.count - 4)...].elementsEqual([13, 10, 13, 10])) {
            guard head.count < 16 << 10 else { throw StreamError(.proxy, "the proxy's answer has no end of head within 16 KiB") }
            head += try receive(descriptor, count: 1, deadline: deadline)
        }
        let statusLine = head.prefix { $0 != 13 }
        let parts = statusLine.split(separator: 0x20)
        guard parts.count >= 2, parts[0].starts(with: Array("HTTP/1.".utf8)), let status = Int(String(decoding: parts[1], as: UTF8.self)) else {
            throw StreamError(.proxy, "the proxy's answer is not HTTP")
        }
        guard (200...299).contains(status) else { throw StreamError(.proxy, "the proxy refused the tunnel with status \(status)") }
    }

    // MARK: SOCKS5

    private static func socks5(
        _ descriptor: Int32, to host: String, port: Int, resolvesNames: Bool, credentials: (String, String)?, deadline: ContinuousClock.Instant
    ) throws(StreamError) {
        // The methods offered: none, and a user name and password when there are some (RFC 1928 §3).
        try send(descriptor, credentials == nil ? [5, 1, 0] : [5, 2, 0, 2], deadline: deadline)
        let chosen = try receive(descriptor, count: 2, deadline: deadline)
        guard chosen[0] == 5 else { throw StreamError(.proxy, "the proxy does not speak SOCKS5") }
        switch chosen[1] {
        case 0: break
        case 2:
            guard let (user, password) = credentials else { throw StreamError(.proxy, "the SOCKS proxy asks for a user name and password") }
            let (name, secret) = (Array(user.utf8), Array(password.utf8))
            guard name.count <= 255, secret.count <= 255 else { throw StreamError(.proxy, "a SOCKS user name or password is longer than 255 bytes") }
            try send(descriptor, [1, UInt8(name.count)] + name + [UInt8(secret.count)] + secret, deadline: deadline)
            let answer = try receive(descriptor, count: 2, deadline: deadline)
            guard answer[1] == 0 else { throw StreamError(.proxy, "the SOCKS proxy refused the user name and password") }
        default:
            throw StreamError(.proxy, "the SOCKS proxy accepts none of the authentication methods offered")
        }
        var request: [UInt8] = [5, 1, 0]
        if resolvesNames || StreamSocketAddress.bytes(host) != nil {
            request += try destination(host, resolvesNames: resolvesNames)
        } else {
            request += try resolvedDestination(host)
        }
        request += [UInt8(truncatingIfNeeded: port >> 8), UInt8(truncatingIfNeeded: port)]
        try send(descriptor, request, deadline: deadline)
        // VER REP RSV ATYP, then the bound address and port, all read so that the stream starts clean.
        let reply = try receive(descriptor, count: 4, deadline: deadline)
        guard reply[0] == 5 else { throw StreamError(.proxy, "the proxy's answer is not SOCKS5") }
        guard reply[1] == 0 else { throw StreamError(.proxy, "the SOCKS proxy could not connect: \(replyReason(reply[1]))") }
        let rest: Int
        switch reply[3] {
        case 1: rest = 4 + 2
        case 4: rest = 16 + 2
        case 3: rest = Int(try receive(descriptor, count: 1, deadline: deadline)[0]) + 2
        default: throw StreamError(.proxy, "the SOCKS proxy answered with an unknown address type \(reply[3])")
        }
        _ = try receive(descriptor, count: rest, deadline: deadline)
    }

    /// The host as the request's address: an IP literal as its bytes, else the name (`socks5h`).
    private static func destination(_ host: String, resolvesNames: Bool) throws(StreamError) -> [UInt8] {
        if let address = StreamSocketAddress.bytes(host) { return (address.count == 4 ? [1] : [4]) + address }
        let name = Array(host.utf8)
        guard name.count <= 255 else { throw StreamError(.cannotFindHost, "the host name is longer than SOCKS allows (255 bytes)") }
        return [3, UInt8(name.count)] + name
    }

    /// The host's first address, resolved here (`socks5`).
    private static func resolvedDestination(_ host: String) throws(StreamError) -> [UInt8] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &found)
        guard status == 0, let first = found else {
            throw StreamError(.cannotFindHost, "cannot resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(first) }
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let address = entry {
            entry = address.pointee.ai_next
            guard let raw = address.pointee.ai_addr else { continue }
            if address.pointee.ai_family == AF_INET {
                let bytes = raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { withUnsafeBytes(of: $0.pointee.sin_addr) { Array($0) } }
                return [1] + bytes
            }
            if address.pointee.ai_family == AF_INET6 {
                let bytes = raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) } }
                return [4] + bytes
            }
        }
        throw StreamError(.cannotFindHost, "\(host) has no IPv4 or IPv6 address")
    }

    private static func replyReason(_ code: UInt8) -> String {
        switch code {
        case 1: "general failure"
        case 2: "not allowed by its rules"
        case 3: "network unreachable"
        case 4: "host unreachable"
        case 5: "connection refused"
        case 6: "TTL expired"
        case 7: "command not supported"
        case 8: "address type not supported"
        default: "reply \(code)"
        }
    }

    // MARK: Bytes

    private static func send(_ descriptor: Int32, _ bytes: [UInt8], deadline: ContinuousClock.Instant) throws(StreamError) {
        var sent = 0
        while sent < bytes.count {
            guard StreamSocket.waitFor(descriptor, events: Int16(POLLOUT), deadline: deadline) else {
                throw StreamError(.timedOut, "the proxy did not take the request in time")
            }
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw StreamError(.proxy, "the proxy went away: \(String(cString: strerror(errno)))")
            }
            sent += count
        }
    }

    /// Exactly `count` bytes, never more.
    private static func receive(_ descriptor: Int32, count: Int, deadline: ContinuousClock.Instant) throws(StreamError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            guard StreamSocket.waitFor(descriptor, events: Int16(POLLIN), deadline: deadline) else {
                throw StreamError(.timedOut, "the proxy did not answer in time")
            }
            let read = bytes[got...].withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if read < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw StreamError(.proxy, "the proxy went away: \(String(cString: strerror(errno)))")
            }
            guard read > 0 else { throw StreamError(.proxy, "the proxy closed the connection") }
            got += read
        }
        return bytes
    }
}

/// An IP literal's bytes (4 or 16), or nil for a name.
package enum StreamSocketAddress {
    /// `host`'s bytes when it is an IPv4 or IPv6 address (in brackets or not).
    package static func bytes(_ host: String) -> [UInt8]? {
        var literal = host
        if literal.hasPrefix("["), literal.hasSuffix("]") { literal = String(literal.dropFirst().dropLast()) }
        guard !literal.isEmpty, literal.utf8.count < 64 else { return nil }
        var v4 = [UInt8](repeating: 0, count: 4)
        if inet_pton(AF_INET, literal, &v4) == 1 { return v4 }
        var v6 = [UInt8](repeating: 0, count: 16)
        if inet_pton(AF_INET6, literal, &v6) == 1 { return v6 }
        return nil
    }
}
