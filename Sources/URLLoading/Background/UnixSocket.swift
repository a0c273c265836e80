package import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Locking
import Synchronization

/// A Unix stream socket carrying `BackgroundMessage` frames. Writes are
/// whole frames under one lock (several threads may send); reads belong to
/// one thread at a time.
package final class UnixSocket: Sendable {
    package let descriptor: Int32
    private let writing = Lock(())
    private let closed = Lock(false)
    /// The peer said it reads frames of the compact body (revision 3).
    private let sendsCompactFrames = Atomic(false)

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

    /// From now on, frames go with the compact body: the peer said it reads them.
    package func sendCompactFrames() {
        sendsCompactFrames.store(true, ordering: .relaxed)
    }

    /// Sends one message whole; with `descriptor`, an open descriptor goes
    /// with its first byte (`SCM_RIGHTS`; the caller still owns its copy).
    package func send(_ message: BackgroundMessage, passing descriptor: Int32? = nil) throws {
        try write(try BackgroundFraming.encode(message, compact: sendsCompactFrames.load(ordering: .relaxed)), passing: descriptor)
    }

    /// Sends messages in one write, in order (the peer reads them as they
    /// came together).
    package func send(_ messages: [BackgroundMessage]) throws {
        let compact = sendsCompactFrames.load(ordering: .relaxed)
        var frames = Data()
        for message in messages { frames.append(try BackgroundFraming.encode(message, compact: compact)) }
        try write(frames, passing: nil)
    }

    private func write(_ frame: Data, passing descriptor: Int32?) throws {
        try writing.withLock { _ in
            try frame.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws in
                guard let base = raw.baseAddress else { return }
                var offset = 0
                if let descriptor {
                    offset = try sendFirst(UnsafeMutableRawPointer(mutating: base), count: raw.count, descriptor: descriptor)
                }
                while offset < raw.count {
                    let sent = Glibc.send(self.descriptor, base + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                    if sent < 0 {
                        if errno == EINTR { continue }
                        throw BackgroundWireError("the peer went away: \(String(cString: strerror(errno)))")
                    }
                    offset += sent
                }
            }
        }
    }

    /// `cmsghdr`'s size and the alignment of what follows it (`CMSG_ALIGN`).
    private static let controlHeader = MemoryLayout<cmsghdr>.size
    private static func controlAlign(_ length: Int) -> Int {
        let word = MemoryLayout<Int>.size
        return (length + word - 1) & ~(word - 1)
    }

    /// The first bytes of a frame with one descriptor; returns how many were sent.
    private func sendFirst(_ base: UnsafeMutableRawPointer, count: Int, descriptor passed: Int32) throws -> Int {
        let dataLength = MemoryLayout<Int32>.size
        var control = [UInt8](repeating: 0, count: Self.controlAlign(Self.controlHeader) + Self.controlAlign(dataLength))
        while true {
            let sent = control.withUnsafeMutableBytes { controlBytes -> Int in
                guard let controlBase = controlBytes.baseAddress else { return -1 }
                let header = controlBase.assumingMemoryBound(to: cmsghdr.self)
                header.pointee.cmsg_len = Self.controlAlign(Self.controlHeader) + dataLength
                header.pointee.cmsg_level = SOL_SOCKET
                header.pointee.cmsg_type = Int32(SCM_RIGHTS)
                controlBase.storeBytes(of: passed, toByteOffset: Self.controlAlign(Self.controlHeader), as: Int32.self)
                var vector = iovec(iov_base: base, iov_len: count)
                return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                    var message = msghdr()
                    message.msg_iov = vectorPointer
                    message.msg_iovlen = 1
                    message.msg_control = controlBase
                    message.msg_controllen = controlBytes.count
                    return sendmsg(descriptor, &message, Int32(MSG_NOSIGNAL))
                }
            }
            if sent < 0 {
                if errno == EINTR { continue }
                throw BackgroundWireError("the peer went away: \(String(cString: strerror(errno)))")
            }
            return sent
        }
    }

    /// Reads until the next message; nil at the end of the stream.
    /// Descriptors the peer passed go into `framing`, for the message that
    /// claims them.
    package func receive(_ framing: inout BackgroundFraming) throws -> BackgroundMessage? {
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        let room = Self.controlAlign(Self.controlHeader) + Self.controlAlign(BackgroundFraming.maximumDescriptors * MemoryLayout<Int32>.size)
        var control = [UInt8](repeating: 0, count: room)
        while true {
            if let message = try framing.next() { return message }
            var received: [Int32] = []
            var truncated = false
            let count = chunk.withUnsafeMutableBytes { bytes -> Int in
                control.withUnsafeMutableBytes { controlBytes -> Int in
                    var vector = iovec(iov_base: bytes.baseAddress, iov_len: bytes.count)
                    return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                        var message = msghdr()
                        message.msg_iov = vectorPointer
                        message.msg_iovlen = 1
                        message.msg_control = controlBytes.baseAddress
                        message.msg_controllen = controlBytes.count
                        let count = recvmsg(descriptor, &message, Int32(MSG_CMSG_CLOEXEC))
                        guard count >= 0, let base = controlBytes.baseAddress else { return count }
                        truncated = message.msg_flags & Int32(MSG_CTRUNC) != 0
                        received = Self.descriptors(in: UnsafeRawBufferPointer(start: base, count: min(message.msg_controllen, controlBytes.count)))
                        return count
                    }
                }
            }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if truncated {
                // The kernel closed what did not fit; which message they belonged to is lost.
                for descriptor in received { _ = Glibc.close(descriptor) }
                framing.closeDescriptors()
                throw BackgroundWireError("the peer passed more descriptors than one read takes")
            }
            try framing.append(descriptors: received)
            if count == 0 { return nil }
            framing.append(Data(chunk[0..<count]))
        }
    }

    /// The `SCM_RIGHTS` descriptors in a control buffer the kernel filled.
    private static func descriptors(in control: UnsafeRawBufferPointer) -> [Int32] {
        var found: [Int32] = []
        var offset = 0
        while offset + controlHeader <= control.count {
            let length = control.loadUnaligned(fromByteOffset: offset, as: Int.self)
            let level = control.loadUnaligned(fromByteOffset: offset + MemoryLayout<Int>.size, as: Int32.self)
            let type = control.loadUnaligned(fromByteOffset: offset + MemoryLayout<Int>.size + 4, as: Int32.self)
            guard length >= controlHeader, offset + length <= control.count else { break }
            if level == SOL_SOCKET, type == Int32(SCM_RIGHTS) {
                let data = offset + controlAlign(controlHeader)
                let count = (offset + length - data) / MemoryLayout<Int32>.size
                for index in 0..<max(0, count) {
                    found.append(control.loadUnaligned(fromByteOffset: data + index * 4, as: Int32.self))
                }
            }
            offset += controlAlign(length)
        }
        return found
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
