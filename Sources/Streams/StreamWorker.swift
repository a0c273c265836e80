import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One connection's state and work: its name resolved (or a proxy's
/// tunnel opened) on a connecting thread (`StreamConnector`), then
/// connected and serviced by its loop (`StreamLoop`), which calls
/// `service(now:)` whenever the socket is ready for what the connection
/// waits on, an operation is queued, or a deadline comes; each service
/// carries out the opening and the queued operations as far as they go
/// without blocking.
///
/// Everything but `channel` is touched by one thread at a time (the
/// connecting thread, then the loop's, handed over through the loop's
/// lock), which is why the class may cross between them.
final class StreamWorker: @unchecked Sendable {
    private let channel: StreamChannel
    private let endpoint: StreamConnection.Endpoint
    private(set) var descriptor: Int32 = -1
    private var operations: [StreamConnection.Operation] = []
    /// Bytes read and not yet handed to a read.
    private var buffer = Data()
    private var atEOF = false
    private var readFailure: StreamError?
    private var readClosed = false
    private var writeClosed = false
    /// Bytes of the first queued write already sent.
    private var written = 0
    private var tls: TLSChannel?
    private var handshaking = false
    /// What the socket must become before the blocked step can go on.
    private(set) var wantsRead = false
    private(set) var wantsWrite = false
    /// The connection ended: its operations failed, its socket to be closed.
    private(set) var finished = false
    /// A direct connection's connect, under way on the loop.
    private var opening: StreamOpening?
    /// Who hears that the opening ended.
    private var onConnected: StreamConnection.Completion?
    /// Sockets of addresses that failed, for the loop to close.
    private var retired: [Int32] = []

    // The loop's bookkeeping.
    /// The connection's key in its loop's epoll set.
    var identifier: UInt64 { channel.identifier }
    /// The loop's buffer reads land in before they join `buffer`.
    var scratch = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    /// The epoll events the socket is registered for (0: not in the set).
    var registered: UInt32 = 0
    /// The deadline the loop's heap holds for this connection.
    var scheduledDeadline: ContinuousClock.Instant?
    /// The loop's turn that last serviced the connection.
    var lastTurn: UInt64 = 0

    init(channel: StreamChannel, endpoint: StreamConnection.Endpoint) {
        self.channel = channel
        self.endpoint = endpoint
    }

    /// On a connecting thread: resolves the host (a proxy's tunnel is
    /// opened here, blocking) and hands the connection to `loop`, which
    /// connects it; `connected` hears once that it is (nil) or why not.
    /// Without a loop (none could start) the connection fails.
    func open(connected: @escaping StreamConnection.Completion, on loop: StreamLoop?) {
        let cancelled = channel.shared.withLock { $0.cancelled }
        guard let loop, cancelled == nil else {
            let reason = cancelled ?? StreamError(.io, "the connection has no loop to run on")
            connected(reason)
            return end(reason)
        }
        let deadline = ContinuousClock.now + endpoint.connectTimeout
        do {
            if endpoint.proxy != nil {
                descriptor = try StreamSocket.connect(host: endpoint.host, port: endpoint.port, proxy: endpoint.proxy, deadline: deadline)
                connected(nil)
            } else {
                try StreamSocket.check(host: endpoint.host, port: endpoint.port)
                let addresses = try StreamSocket.resolve(host: endpoint.host, port: endpoint.port)
                opening = StreamOpening(host: endpoint.host, port: endpoint.port, deadline: deadline, addresses: addresses)
                onConnected = connected
            }
        } catch {
            connected(error)
            end(error)
            closeDescriptor()
            return
        }
        loop.adopt(self)
    }

    /// Goes on with the opening, if any; true once connected.
    private func goOnOpening(_ now: ContinuousClock.Instant) -> Bool {
        guard var current = opening else { return true }
        let step = current.advance()
        retired += current.takeRetired()
        descriptor = current.descriptor
        opening = current
        switch step {
        case .waiting:
            guard current.deadline > now else {
                failOpening(StreamError(.timedOut, "connecting to \(current.host):\(current.port) timed out"))
                return false
            }
            wantsWrite = true
            return false
        case .connected(let connected):
            descriptor = connected
            opening = nil
            let tell = onConnected
            onConnected = nil
            tell?(nil)
            return true
        case .failed(let error):
            failOpening(error)
            return false
        }
    }

    /// The opening failed or was cancelled: `connected` hears why, and the
    /// connection ends (its socket, if any, closed by the loop).
    private func failOpening(_ error: StreamError) {
        opening = nil
        let tell = onConnected
        onConnected = nil
        tell?(error)
        end(error)
    }

    /// Sockets the opening gave up on, handed to the loop once to close.
    func takeRetired() -> [Int32] {
        defer { retired = [] }
        return retired
    }

    /// On the loop: takes the newly queued operations and does what can be
    /// done now; `wantsRead`, `wantsWrite` and `nextDeadline()` then say
    /// what to wait for.
    func service(now: ContinuousClock.Instant) {
        guard !finished else { return }
        let (new, cancelled) = channel.shared.withLock { state in
            defer { state.operations = [] }
            return (state.operations, state.cancelled)
        }
        operations += new
        if let cancelled { return opening == nil ? end(cancelled) : failOpening(cancelled) }
        wantsRead = false
        wantsWrite = false
        guard goOnOpening(now) else { return }
        while step() {}
        // An operation that timed out may have held back others that can go now.
        if expire(now) { while step() {} }
    }

    /// Ends the connection with `reason` at its next service.
    func cancel(_ reason: StreamError) {
        channel.shared.withLock { state in
            if state.cancelled == nil { state.cancelled = reason }
        }
    }

    func closeDescriptor() {
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
        }
    }

    /// Does one piece of work that needs no waiting; false when none is left.
    private func step() -> Bool {
        let barrier = operations.firstIndex { $0.isBarrier } ?? operations.count
        if barrier == 0, let first = operations.first { return runBarrier(first) }
        if let index = operations[..<barrier].firstIndex(where: \.isRead), readStep(index) { return true }
        // (Looked up anew: a read step may have taken an operation out.)
        let end = operations.firstIndex { $0.isBarrier } ?? operations.count
        if let index = operations[..<end].firstIndex(where: { !$0.isRead }), writeStep(index) { return true }
        return false
    }

    private func complete(_ index: Int) -> StreamConnection.Operation {
        operations.remove(at: index)
    }

    // MARK: Reads

    private func readStep(_ index: Int) -> Bool {
        switch operations[index] {
        case .closeRead:
            _ = complete(index)
            readClosed = true
            if tls == nil { _ = shutdown(descriptor, Int32(SHUT_RD)) }
            return true
        case .read(let minimum, let maximum, _, let completion):
            if readClosed {
                _ = complete(index)
                completion(.failure(StreamError(.closed, "the read side is closed")))
                return true
            }
            if !buffer.isEmpty, buffer.count >= max(1, minimum) || atEOF || readFailure != nil {
                _ = complete(index)
                let taken: Data
                if buffer.count <= maximum {
                    taken = buffer
                    buffer = Data()
                } else {
                    taken = Data(buffer.prefix(maximum))
                    buffer = Data(buffer.dropFirst(maximum))
                }
                completion(.success((taken, atEOF && buffer.isEmpty)))
                return true
            }
            if atEOF {
                _ = complete(index)
                completion(.success((Data(), true)))
                return true
            }
            if let readFailure {
                _ = complete(index)
                completion(.failure(readFailure))
                return true
            }
            return fill()
        default:
            return false
        }
    }

    /// Reads what the socket has into the buffer; true when something changed.
    private func fill() -> Bool {
        if let tls {
            let step = tls.read(into: scratch)
            switch step {
            case .done(let count):
                keep(count)
                return true
            case .wantRead: wantsRead = true
            case .wantWrite: wantsWrite = true
            case .closed: atEOF = true
            case .failed(let reason): readFailure = StreamError(.tls, reason)
            }
            return atEOF || readFailure != nil
        }
        let count = recv(descriptor, scratch.baseAddress, scratch.count, 0)
        if count > 0 {
            keep(count)
            return true
        }
        if count == 0 {
            atEOF = true
            return true
        }
        if errno == EAGAIN || errno == EINTR {
            wantsRead = true
            return false
        }
        readFailure = StreamError(.io, "reading failed: \(String(cString: strerror(errno)))")
        return true
    }

    /// Appends the first `count` bytes of `scratch` to the buffer.
    private func keep(_ count: Int) {
        if let base = scratch.baseAddress { buffer.append(base.assumingMemoryBound(to: UInt8.self), count: min(count, scratch.count)) }
    }

    // MARK: Writes

    private func writeStep(_ index: Int) -> Bool {
        switch operations[index] {
        case .closeWrite(let completion):
            if let tls, !writeClosed {
                switch tls.shutdown() {
                case .wantWrite:
                    wantsWrite = true
                    return false
                case .wantRead, .done, .closed, .failed: break
                }
            }
            _ = complete(index)
            writeClosed = true
            _ = shutdown(descriptor, Int32(SHUT_WR))
            completion(nil)
            return true
        case .write(let data, _, let completion):
            if writeClosed {
                _ = complete(index)
                completion(StreamError(.closed, "the write side is closed"))
                return true
            }
            while written < data.count {
                switch send(data, from: written) {
                case .sent(let count): written += count
                case .wait: return false
                case .failed(let error):
                    _ = complete(index)
                    written = 0
                    completion(error)
                    return true
                }
            }
            _ = complete(index)
            written = 0
            completion(nil)
            return true
        default:
            return false
        }
    }

    private enum Sent {
        case sent(Int)
        /// The socket (or TLS) must become ready first.
        case wait
        case failed(StreamError)
    }

    /// Sends from `offset`.
    private func send(_ data: Data, from offset: Int) -> Sent {
        data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Sent in
            let rest = UnsafeRawBufferPointer(rebasing: raw[offset...])
            if let tls {
                switch tls.write(rest) {
                case .done(let count): return .sent(count)
                case .wantRead:
                    wantsRead = true
                    return .wait
                case .wantWrite:
                    wantsWrite = true
                    return .wait
                case .closed: return .failed(StreamError(.closed, "the peer ended TLS"))
                case .failed(let reason): return .failed(StreamError(.tls, reason))
                }
            }
            let count = Glibc.send(descriptor, rest.baseAddress, rest.count, Int32(MSG_NOSIGNAL))
            if count >= 0 { return .sent(count) }
            if errno == EAGAIN || errno == EINTR {
                wantsWrite = true
                return .wait
            }
            return .failed(StreamError(.closed, "writing failed: \(String(cString: strerror(errno)))"))
        }
    }

    // MARK: TLS

    private func runBarrier(_ operation: StreamConnection.Operation) -> Bool {
        switch operation {
        case .startTLS(let serverName, let completion):
            if !handshaking {
                guard tls == nil else {
                    _ = complete(0)
                    completion(StreamError(.tls, "TLS is already on"))
                    return true
                }
                do {
                    tls = try TLSChannel(descriptor: descriptor, serverName: serverName, options: endpoint.tls)
                    handshaking = true
                } catch {
                    _ = complete(0)
                    completion(error)
                    return true
                }
            }
            switch tls?.handshake() ?? .failed("no TLS") {
            case .done:
                handshaking = false
                _ = complete(0)
                completion(nil)
                return true
            case .wantRead:
                wantsRead = true
                return false
            case .wantWrite:
                wantsWrite = true
                return false
            case .closed:
                return failHandshake(StreamError(.tls, "the server closed the connection during the TLS handshake"), completion)
            case .failed(let reason):
                return failHandshake(StreamError(.tls, reason), completion)
            }
        case .stopTLS(let completion):
            guard let tls else {
                _ = complete(0)
                completion(StreamError(.tls, "TLS is not on"))
                return true
            }
            if case .wantWrite = tls.shutdown() {
                wantsWrite = true
                return false
            }
            self.tls = nil
            _ = complete(0)
            completion(nil)
            return true
        case .barrier(let completion):
            _ = complete(0)
            completion(nil)
            return true
        default:
            return false
        }
    }

    /// A failed handshake leaves nothing usable: the connection ends.
    private func failHandshake(_ error: StreamError, _ completion: StreamConnection.Completion) -> Bool {
        handshaking = false
        tls = nil
        _ = complete(0)
        completion(error)
        end(StreamError(.closed, "the connection ended after a failed TLS handshake"))
        return false
    }

    // MARK: Time and the end

    /// The earliest deadline of a queued read or write; while opening,
    /// the opening's (operations' deadlines count once connected).
    func nextDeadline() -> ContinuousClock.Instant? {
        if let opening { return opening.deadline }
        return operationsDeadline()
    }

    private func operationsDeadline() -> ContinuousClock.Instant? {
        operations.compactMap { operation -> ContinuousClock.Instant? in
            switch operation {
            case .read(_, _, let deadline, _): deadline
            case .write(_, let deadline, _): deadline
            default: nil
            }
        }.min()
    }

    /// Fails the operations whose deadline passed; true when there were any.
    private func expire(_ now: ContinuousClock.Instant) -> Bool {
        var expired = false
        var index = 0
        while index < operations.count {
            switch operations[index] {
            case .read(_, _, let deadline?, let completion) where deadline <= now:
                _ = complete(index)
                expired = true
                completion(.failure(StreamError(.timedOut, "the read timed out")))
            case .write(_, let deadline?, let completion) where deadline <= now:
                _ = complete(index)
                expired = true
                // The first write's partly sent bytes go with it.
                if !operations[..<index].contains(where: { !$0.isRead }) { written = 0 }
                completion(StreamError(.timedOut, "the write timed out"))
            default:
                index += 1
            }
        }
        return expired
    }

    /// Fails what is queued, now and later; the socket is closed by its
    /// owner (the loop takes it out of its set first).
    private func end(_ reason: StreamError) {
        tls = nil
        finished = true
        wantsRead = false
        wantsWrite = false
        let left = channel.shared.withLock { state in
            defer {
                state.operations = []
                state.ended = true
                if state.cancelled == nil { state.cancelled = reason }
            }
            return state.operations
        }
        for operation in operations + left { StreamChannel.fail(operation, reason) }
        operations = []
    }
}
