public import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Locking

/// A real forwarding HTTP proxy on a loopback port, for plain-http requests
/// in absolute form (`GET http://host:port/path HTTP/1.1`): it demands
/// `Proxy-Authorization: Basic` for `user:password` (407 otherwise),
/// forwards the request to its target over a new connection and copies the
/// answer back. One connection per request (`Connection: close`), one
/// thread per connection; enough for tests, not for traffic. With
/// `openTunnels`, it also answers `CONNECT host:port` without asking for
/// credentials and relays bytes both ways (https through the proxy).
public final class TestProxy: Sendable {
    /// What the proxy received: the request line and its Proxy-Authorization field.
    public struct Received: Sendable {
        public var requestLine: String
        public var proxyAuthorization: String?
    }

    /// The port the kernel chose.
    public let port: Int
    /// `http://127.0.0.1:<port>`, for a configuration's proxy.
    public var url: URL { URL(string: "http://127.0.0.1:\(port)")! }
    private let listener: Int32
    private let expected: String
    private let realm: String
    private let openTunnels: Bool
    private let log = Lock<[Received]>([])
    private let stopped = Lock(false)

    /// Every request received, in order.
    public var received: [Received] { log.withLock { $0 } }

    /// Starts a proxy that wants `user:password`.
    public init(user: String, password: String, realm: String = "test proxy", openTunnels: Bool = false) throws {
        expected = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        self.realm = realm
        self.openTunnels = openTunnels
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestOriginError(message: "proxy: socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw TestOriginError(message: "proxy: bind/listen failed")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// Stops accepting connections.
    public func shutdown() {
        stopped.withLock { $0 = true }
        Glibc.shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while !stopped.withLock({ $0 }) {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let thread = Thread { [self] in serve(client) }
            thread.start()
        }
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        guard let (head, body) = Self.readRequest(client) else { return }
        var lines = head.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst()
        let fields = lines.compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let authorization = fields.first { $0.0.lowercased() == "proxy-authorization" }?.1
        log.withLock { $0.append(Received(requestLine: requestLine, proxyAuthorization: authorization)) }
        if openTunnels, requestLine.hasPrefix("CONNECT ") {
            tunnel(client, requestLine: requestLine)
            return
        }
        guard authorization == expected else {
            Self.send(client, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"\(realm)\"\r\nContent-Length: 6\r\nConnection: close\r\n\r\ndenied")
            return
        }
        let parts = requestLine.split(separator: " ")
        guard parts.count == 3, let target = URL(string: String(parts[1])), let host = target.host, let port = target.port else {
            Self.send(client, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        }
        let path = target.path(percentEncoded: true).isEmpty ? "/" : target.path(percentEncoded: true)
        let query = target.query(percentEncoded: true).map { "?" + $0 } ?? ""
        var forwarded = "\(parts[0]) \(path)\(query) \(parts[2])\r\n"
        for (name, value) in fields where !["proxy-authorization", "proxy-connection", "connection"].contains(name.lowercased()) {
            forwarded += "\(name): \(value)\r\n"
        }
        forwarded += "Connection: close\r\n\r\n"
        guard let upstream = Self.connect(host: host, port: port) else {
            Self.send(client, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        }
        defer { close(upstream) }
        Self.send(upstream, forwarded)
        if !body.isEmpty { Self.send(upstream, body) }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(upstream, &buffer, buffer.count)
            guard count > 0 else { break }
            Self.send(client, Array(buffer[0..<count]))
        }
    }

    /// Opens the tunnel a CONNECT asks for and relays until either side closes.
    private func tunnel(_ client: Int32, requestLine: String) {
        let target = requestLine.split(separator: " ").dropFirst().first.map(String.init) ?? ""
        guard let colon = target.lastIndex(of: ":"), let port = Int(target[target.index(after: colon)...]),
            let upstream = Self.connect(host: String(target[..<colon]), port: port)
        else {
            Self.send(client, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        }
        Self.send(client, "HTTP/1.1 200 Connection established\r\n\r\n")
        let done = DispatchSemaphore(value: 0)
        let reverse = Thread {
            Self.relay(from: upstream, to: client)
            Glibc.shutdown(client, Int32(SHUT_WR))
            done.signal()
        }
        reverse.start()
        Self.relay(from: client, to: upstream)
        Glibc.shutdown(upstream, Int32(SHUT_WR))
        done.wait()
        close(upstream)
    }

    private static func relay(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(source, &buffer, buffer.count)
            guard count > 0 else { return }
            send(destination, Array(buffer[0..<count]))
        }
    }

    /// The head (without its blank line) and a Content-Length body.
    private static func readRequest(_ socket: Int32) -> (String, [UInt8])? {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 8192)
        let separator: [UInt8] = [13, 10, 13, 10]
        var headEnd: Int?
        while headEnd == nil {
            let count = read(socket, &buffer, buffer.count)
            guard count > 0 else { return nil }
            data += buffer[0..<count]
            if let range = data.firstRange(of: separator) { headEnd = range.lowerBound }
        }
        guard let headEnd else { return nil }
        let head = String(decoding: data[..<headEnd], as: UTF8.self)
        var body = Array(data[(headEnd + 4)...])
        let length =
            head.components(separatedBy: "\r\n")
            .first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
        while body.count < length {
            let count = read(socket, &buffer, buffer.count)
            guard count > 0 else { break }
            body += buffer[0..<count]
        }
        return (head, body)
    }

    private static func connect(host: String, port: Int) -> Int32? {
        let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(host == "localhost" ? "127.0.0.1" : host)
        address.sin_port = UInt16(port).bigEndian
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(upstream)
            return nil
        }
        return upstream
    }

    private static func send(_ socket: Int32, _ text: String) { send(socket, Array(text.utf8)) }

    private static func send(_ socket: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(socket, $0.baseAddress, $0.count) }
            guard written > 0 else { return }
            offset += written
        }
    }
}
