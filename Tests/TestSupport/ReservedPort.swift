import Glibc
import Locking

/// A loopback TCP port held by a socket that is bound and does not listen.
///
/// A connection to it is refused, as to a port nothing uses, yet no other
/// socket — another test's origin included — can bind it while it is held
/// (the socket has no `SO_REUSEADDR`). A test that needs "nothing listens
/// here" uses one instead of a port it closed, which the kernel may hand to
/// the next server any parallel test starts; `TestOrigin.start(adopting:)`
/// then listens on the same socket, so the port is never free in between.
public final class ReservedPort: Sendable {
    /// The port the kernel chose.
    public let port: Int
    /// The bound socket, until a server adopts it or the reservation ends.
    private let descriptor: Lock<CInt?>

    /// Binds a new TCP socket to 127.0.0.1 on a port the kernel chooses.
    public init() throws {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { throw TestOriginError(message: "socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = in_addr_t(0x7f00_0001).bigEndian
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(socket, generic, length) == 0 && getsockname(socket, generic, &length) == 0
            }
        }
        guard bound else {
            let error = errno
            close(socket)
            throw TestOriginError(message: "binding a loopback port: errno \(error)")
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        descriptor = Lock(socket)
    }

    /// Hands the bound socket to a server, which then owns and closes it;
    /// nil when it was handed over or released before.
    func take() -> CInt? {
        descriptor.withLock { held in
            defer { held = nil }
            return held
        }
    }

    /// Ends the reservation: the port is free again.
    public func release() {
        if let socket = take() { close(socket) }
    }

    deinit { release() }
}
