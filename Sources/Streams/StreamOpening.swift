#if canImport(Glibc)
import Glibc
#endif

/// A direct connection being opened on its loop without blocking: the
/// resolved addresses in turn, each connect begun on a non-blocking socket
/// and looked at again when the loop finds it writable. The loop's thread
/// never waits on a connect, so a host that drops packets holds back no
/// other connection (only name resolution runs on a connecting thread).
struct StreamOpening {
    /// What one look at the connect found.
    enum Step {
        /// The current socket must become writable first.
        case waiting
        /// Connected on this socket (the opening no longer holds it).
        case connected(Int32)
        /// Every address failed.
        case failed(StreamError)
    }

    let host: String
    let port: Int
    /// When the whole opening times out.
    let deadline: ContinuousClock.Instant
    private let addresses: [StreamSocket.Address]
    private var next = 0
    /// The socket whose connect is under way (-1: none).
    private(set) var descriptor: Int32 = -1
    /// Sockets of addresses that failed: the owner takes them out of its
    /// poll set and closes them.
    private(set) var retired: [Int32] = []
    private var reason = "no address"

    init(host: String, port: Int, deadline: ContinuousClock.Instant, addresses: [StreamSocket.Address]) {
        self.host = host
        self.port = port
        self.deadline = deadline
        self.addresses = addresses
    }

    /// Goes as far as it can without waiting.
    mutating func advance() -> Step {
        while true {
            if descriptor >= 0 {
                var entry = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                guard poll(&entry, 1, 0) > 0 else { return .waiting }
                if let failure = StreamSocket.outcome(descriptor) {
                    reason = failure
                    retired.append(descriptor)
                    descriptor = -1
                    continue
                }
                let connected = descriptor
                descriptor = -1
                return .connected(connected)
            }
            guard next < addresses.count else { return .failed(StreamError(.cannotConnect, "cannot connect to \(host):\(port): \(reason)")) }
            let address = addresses[next]
            next += 1
            switch StreamSocket.begin(address) {
            case .started(let started): descriptor = started
            case .failed(let failure): reason = failure
            }
        }
    }

    /// The failed sockets, handed over once.
    mutating func takeRetired() -> [Int32] {
        defer { retired = [] }
        return retired
    }
}
