package import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Locking

/// A Unix stream socket carrying `BackgroundMessage` frames. Writes are
/// whole frames under one lock (several threads may send); reads belong to
/// one thread at a time.
package final class UnixSocket: Sendable {
    package let descriptor: Int32
    private let writing = Lock(())
    private let closed = Lock(false)

    package init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit {
        close()
    }

    /// Connects to the socket at `path`.
    package static func connect(path: String) throws(BackgroundWireError) -> UnixSocket {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw BackgroundWireError("cannot make a socket: \(String(cString: strerror(errno)))") }
        let socket = UnixSocket(descriptor: fd)
        var address = try address(path)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else { throw BackgroundWireError("cannot connect to \(path): \(String(cString: strerror(errno)))") }
        return socket
    }

    /// A listening socket at `path` (a stale socket file there is replaced;
    /// the caller holds the lock that makes it the only listener).
    package static func listen(path: String) throws(BackgroundWireError) -> UnixSocket {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw BackgroundWireError("cannot make a socket: \(String(cString: strerror(errno)))") }
        let socket = UnixSocket(descriptor: fd)
        var address = try address(path)
        unlink(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw BackgroundWireError("cannot bind \(path): \(String(cString: strerror(errno)))") }
        chmod(path, 0o600)
        guard Glibc.listen(fd, 64) == 0 else { throw BackgroundWireError("cannot listen on \(path): \(String(cString: strerror(errno)))") }
        return socket
    }

    private static func address(_ path: String) throws(BackgroundWireError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity, !bytes.contains(0) else {
            throw BackgroundWireError("the socket path \(path) is longer than \(capacity - 1) bytes: set XDG_RUNTIME_DIR to a shorter folder")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        return address
    }

    /// The next connection; nil when the listening socket was closed.
    package func accept() -> UnixSocket? {
        while true {
            let fd = Glibc.accept(descriptor, nil, nil)
            if fd >= 0 {
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                return UnixSocket(descriptor: fd)
            }
            if errno == EINTR || errno == ECONNABORTED { continue }
            return nil
        }
    }

    /// The connected peer's user id (`SO_PEERCRED`).
    package var peerUserID: uid_t? {
        // struct ucred is pid, uid, gid: three 32-bit fields on Linux.
        var credentials: (Int32, UInt32, UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        guard getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else { return nil }
        return credentials.1
    }

    /// Sends one message whole.
    package func send(_ message: BackgroundMessage) throws {
        let frame = try BackgroundFraming.encode(message)
        try writing.withLock { _ in
            try frame.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws in
                guard let base = raw.baseAddress else { return }
                var offset = 0
                while offset < raw.count {
                    let sent = Glibc.send(descriptor, base + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                    if sent < 0 {
                        if errno == EINTR { continue }
                        throw BackgroundWireError("the peer went away: \(String(cString: strerror(errno)))")
                    }
                    offset += sent
                }
            }
        }
    }

    /// Reads until the next message; nil at the end of the stream.
    package func receive(_ framing: inout BackgroundFraming) throws -> BackgroundMessage? {
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            if let message = try framing.next() { return message }
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if count == 0 { return nil }
            framing.append(Data(chunk[0..<count]))
        }
    }

    /// Waits up to `seconds` for bytes (or the end) to be readable.
    package func waitReadable(seconds: Double) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(max(0, min(seconds, 86_400)) * 1000)
        return poll(&entry, 1, milliseconds) > 0
    }

    /// Ends both directions: a thread blocked reading returns.
    package func shutdownBoth() {
        _ = Glibc.shutdown(descriptor, Int32(SHUT_RDWR))
    }

    package func close() {
        let first = closed.withLock { wasClosed -> Bool in
            defer { wasClosed = true }
            return !wasClosed
        }
        if first { _ = Glibc.close(descriptor) }
    }
}
