public import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Locking

/// A real HTTP/1.1 origin on a loopback port chosen by the kernel, scripted
/// per route by the test that starts it, logging every request it receives.
///
/// ```swift
/// let origin = try await TestOrigin.start()
/// defer { Task { try await origin.shutdown() } }
/// origin.route("/hello") { _ in ScriptedResponse(body: "hi") }
/// ```
public final class TestOrigin: Sendable {
    /// A route's handler: gets the whole request, returns the response.
    /// Synchronous, and run on the origin's event loop: the origin answers
    /// even while the tests keep Swift's cooperative threads busy. Timing
    /// belongs in the response (`delayBeforeHead`, `.pause` parts).
    public typealias Handler = @Sendable (RecordedRequest) -> ScriptedResponse

    /// The port the kernel chose.
    public let port: Int
    /// The Unix-domain socket it listens on, or nil on a TCP port.
    public let unixSocket: String?
    /// Whether the origin speaks TLS.
    public let usesTLS: Bool
    private let channel: any Channel
    private let shared: SharedState
    /// An event-loop group of its own, shut down with the origin (nil: the shared one).
    private let ownGroup: MultiThreadedEventLoopGroup?

    struct State {
        var routes: [String: Handler] = [:]
        /// Paths whose request bodies go to files in these directories.
        var bodySinks: [String: URL] = [:]
        var storedBodies = 0
        var log: [RecordedRequest] = []
        var connections = 0
        /// Connections open now, and the most open at once.
        var open = 0
        var peakOpen = 0
        /// Response writes the sockets have not taken yet (a client that
        /// stopped reading leaves one waiting), and the bytes they took.
        var waitingWrites: [Int: ContinuousClock.Instant] = [:]
        var writesStarted = 0
        var bodyBytesWritten = 0
        var shutDown = false
    }

    private init(
        channel: any Channel, port: Int, usesTLS: Bool, shared: SharedState, ownGroup: MultiThreadedEventLoopGroup?, unixSocket: String? = nil
    ) {
        self.unixSocket = unixSocket
        self.channel = channel
        self.port = port
        self.usesTLS = usesTLS
        self.shared = shared
        self.ownGroup = ownGroup
    }

    /// Starts an origin on 127.0.0.1.
    ///
    /// - Parameters:
    ///   - tls: Serve HTTPS with this server identity (see `TestCertificates`);
    ///     plain HTTP when nil.
    ///   - reserved: Listen on this reserved port's socket instead of a new
    ///     one on a port the kernel chooses (for a client that was refused
    ///     there until now).
    ///   - routes: Routes in place before the first connection is accepted
    ///     (for a client that is already trying to connect).
    ///   - ownThread: Serve from an event-loop thread of its own instead of
    ///     the group every origin of the process shares (for tests whose
    ///     timing another test's busy handler must not disturb).
    ///   - unixSocket: Listen on a Unix-domain socket at this path instead
    ///     of a TCP port (`baseURL` is then an `http+unix` URL).
    public static func start(
        tls: TestCertificates.ServerIdentity? = nil, adopting reserved: ReservedPort? = nil, routes: [String: ScriptedResponse] = [:],
        ownThread: Bool = false, unixSocket: String? = nil
    ) async throws -> TestOrigin {
        _ = Self.decoderMetadataReady
        let boundSocket = try reserved.map { reserved throws(TestOriginError) -> CInt in
            guard let socket = reserved.take() else { throw TestOriginError(message: "the reserved port was handed over or released") }
            return socket
        }
        let ownGroup = ownThread ? MultiThreadedEventLoopGroup(numberOfThreads: 1) : nil
        let sslContext = try tls.map { try $0.makeServerContext() }
        // The origin object is created after binding, so the handlers reach
        // the shared state through this box.
        let shared = SharedState()
        shared.state.withLock { state in
            for (path, response) in routes { state.routes[path] = { _ in response } }
        }
        var bootstrap = ServerBootstrap(group: ownGroup ?? MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 256)
        if unixSocket == nil { bootstrap = bootstrap.childChannelOption(.socketOption(.tcp_nodelay), value: 1) }
        bootstrap = bootstrap.childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                let number = shared.state.withLock { state -> Int in
                    state.connections += 1
                    state.open += 1
                    state.peakOpen = max(state.peakOpen, state.open)
                    return state.connections
                }
                let sync = channel.pipeline.syncOperations
                if let sslContext {
                    try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                }
                try sync.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)))
                try sync.addHandler(
                    OriginConnectionHandler(
                        shared: shared, connectionNumber: number, overTLS: sslContext != nil))
            }
        }
        let channel: any Channel
        if let unixSocket {
            channel = try await bootstrap.bind(unixDomainSocketPath: unixSocket, cleanupExistingSocketFile: true).get()
            return TestOrigin(channel: channel, port: 0, usesTLS: false, shared: shared, ownGroup: ownGroup, unixSocket: unixSocket)
        } else if let boundSocket {
            channel = try await bootstrap.withBoundSocket(boundSocket).get()
        } else {
            channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        }
        guard let port = reserved?.port ?? channel.localAddress?.port else {
            try await channel.close()
            try? await ownGroup?.shutdownGracefully()
            throw TestOriginError(message: "the listening socket has no port")
        }
        return TestOrigin(channel: channel, port: port, usesTLS: sslContext != nil, shared: shared, ownGroup: ownGroup)
    }

    /// Made once per process, on one thread, before any origin accepts a
    /// connection. Swift 6.3's runtime can crash (a null superclass read in
    /// `getSuperclassForMaybeIncompleteMetadata`) when threads first make a
    /// generic root class's metadata at the same moment and one checks a
    /// conformance on it while another is still completing it; every event
    /// loop makes this handler, with `HTTPDecoder`, for its first
    /// connection. It crashed the AddressSanitizer pass of CI twice.
    private static let decoderMetadataReady: Void = {
        _ = ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes))
    }()

    /// `http://127.0.0.1:<port>` (or `https://localhost:<port>` with TLS,
    /// the name the test certificate is issued for; `http+unix://` and the
    /// socket's path percent-encoded on a Unix-domain socket).
    public var baseURL: URL {
        if let unixSocket {
            let encoded = unixSocket.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? ""
            // Force-unwrap is safe: every byte of the host is percent-encoded or unreserved.
            return URL(string: "http+unix://\(encoded)")!
        }
        // Force-unwrap is safe: the string is built from a number.
        return URL(string: usesTLS ? "https://localhost:\(port)" : "http://127.0.0.1:\(port)")!
    }

    /// The URL of `path` (which may carry a query) on this origin.
    public func url(_ path: String) -> URL {
        URL(string: baseURL.absoluteString + path) ?? baseURL
    }

    /// Scripts `path` (matched without the query): every request to it gets
    /// what `handler` returns. Replaces an earlier script for the same path.
    public func route(_ path: String, _ handler: @escaping Handler) {
        shared.state.withLock { $0.routes[path] = handler }
    }

    /// Scripts `path` to answer every request with `response`.
    public func route(_ path: String, response: ScriptedResponse) {
        route(path) { _ in response }
    }

    /// Stores the bodies of requests to `path` in new files in `directory`
    /// instead of memory (`RecordedRequest.bodyFile`): uploads of gigabytes
    /// cost the origin no memory.
    public func storeBodies(of path: String, in directory: URL) {
        shared.state.withLock { $0.bodySinks[path] = directory }
    }

    /// Every request received, in arrival order.
    public var requests: [RecordedRequest] {
        shared.state.withLock { $0.log }
    }

    /// The requests received for `path` (without query).
    public func requests(to path: String) -> [RecordedRequest] {
        requests.filter { $0.path == path }
    }

    /// Connections accepted so far.
    public var connectionCount: Int {
        shared.state.withLock { $0.connections }
    }

    /// How long the oldest response write still waiting for its socket has
    /// waited (zero when none waits): long when the client's receive
    /// window stays full (it stopped reading: back-pressure).
    public var longestWaitingWrite: Duration {
        let now = ContinuousClock.now
        return shared.state.withLock { state in state.waitingWrites.values.min().map { now - $0 } ?? .zero }
    }

    /// Response body bytes the sockets took so far.
    public var bodyBytesWritten: Int {
        shared.state.withLock { $0.bodyBytesWritten }
    }

    /// The most connections that were open at once (a client may close one
    /// and open another: `connectionCount` counts both).
    public var peakConcurrentConnections: Int {
        shared.state.withLock { $0.peakOpen }
    }

    /// Stops listening and closes the listening socket. Open connections
    /// finish their current response.
    public func shutdown() async throws {
        try await channel.close()
        try await ownGroup?.shutdownGracefully()
    }

    /// The pattern's period: a prime, so the pattern is not periodic at
    /// any power of two and a misplaced range shows.
    static let patternPeriod = 1_048_573

    /// One period of the pattern, computed once: slices of it are copied,
    /// not computed byte by byte (a debug build's per-byte loop on the
    /// shared event loop threads delayed every test's origin).
    ///
    /// A plain loop: `(0..<n).map` here crashed once in CI inside the Swift
    /// runtime (`swift_getAssociatedConformanceWitness`, a null pointer,
    /// while the origin's event loop waited on the same one-time
    /// initialization); the loop needs no generic conformance lookup.
    static let patternTable: [UInt8] = {
        var table = [UInt8](repeating: 0, count: patternPeriod)
        var index = 0
        while index < patternPeriod {
            table[index] = UInt8(truncatingIfNeeded: (index &* 2_654_435_761) >> 13 ^ index)
            index += 1
        }
        return table
    }()

    /// Byte `index` of the deterministic body pattern of `.pattern` parts.
    public static func patternByte(at index: Int) -> UInt8 {
        patternTable[index % patternPeriod]
    }

    /// Whether the file holds bytes `0..<count` of the pattern and no more
    /// (read a mebibyte at a time: a stored upload of any length).
    public static func fileHoldsPattern(_ url: URL, count: Int) throws -> Bool {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        var offset = 0
        while offset < count {
            let length = min(1 << 20, count - offset)
            guard let data = try handle.read(upToCount: length), data.count == length, isPattern(data, offset: offset) else { return false }
            offset += length
        }
        return try handle.read(upToCount: 1)?.isEmpty ?? true
    }

    /// Whether `bytes` are the pattern's from `offset` on (compared a
    /// period at a time with `memcmp`: cheap even in a debug build).
    public static func isPattern(_ bytes: some ContiguousBytes, offset: Int) -> Bool {
        bytes.withUnsafeBytes { given in
            var done = 0
            var index = offset % patternPeriod
            while done < given.count {
                let take = min(given.count - done, patternPeriod - index)
                let same = patternTable.withUnsafeBytes { table in
                    memcmp(given.baseAddress! + done, table.baseAddress! + index, take) == 0
                }
                guard same else { return false }
                done += take
                index = 0
            }
            return true
        }
    }

    /// Bytes `offset..<offset+count` of the pattern.
    public static func pattern(offset: Int, count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        var index = offset % patternPeriod
        while bytes.count < count {
            let take = min(count - bytes.count, patternPeriod - index)
            bytes += patternTable[index..<(index + take)]
            index = 0
        }
        return bytes
    }
}

/// What the listening socket and its connections share.
final class SharedState: Sendable {
    let state = Lock(TestOrigin.State())

    /// A new file for the body of a request to `path`, if its bodies are stored.
    func bodyFile(for path: String) -> (handle: FileHandle, url: URL)? {
        let url = state.withLock { state -> URL? in
            guard let directory = state.bodySinks[path] else { return nil }
            state.storedBodies += 1
            return directory.appendingPathComponent("body-\(state.storedBodies)")
        }
        guard let url, FileManager.default.createFile(atPath: url.path, contents: nil),
            let handle = FileHandle(forWritingAtPath: url.path)
        else { return nil }
        return (handle, url)
    }

    func record(_ request: RecordedRequest) -> TestOrigin.Handler? {
        state.withLock { state in
            state.log.append(request)
            return state.routes[request.path]
        }
    }
}

/// An error of the test origin itself.
public struct TestOriginError: Error, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
