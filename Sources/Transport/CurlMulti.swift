import CCurl
import Foundation
import Locking
import Synchronization

/// The transport: threads running libcurl's multi interface (`CurlLoop`),
/// one by default, each carrying every transfer of the origins it was given,
/// with connection reuse and HTTP/2 multiplexing across them. Work arrives
/// as commands (start, cancel, unpause, shut down) and wakes a loop with
/// `curl_multi_wakeup`; a loop's thread alone touches its easy handles, so
/// libcurl is never called from two threads on one handle. Several loops
/// keep each origin on one loop, so they never multiply its
/// connections, and share DNS answers and TLS sessions (`CurlShare`).
///
/// State machine of a transfer (on the loop thread): added → (head received)
/// → (body, possibly paused and unpaused) → done; a cancel command at any
/// point removes it. Each ends with exactly one `transferDidComplete`.
///
/// One turn of the loop: take the commands → `curl_multi_perform` → hand
/// over finished transfers → expire idle ones → then, when the turn did
/// work (took a command, received head lines or finished a transfer):
/// **spin** — look again without sleeping, for at most
/// `CurlLoop.socketSpinNanoseconds` (transfers running) or
/// `CurlLoop.commandSpinNanoseconds` (none), until a command
/// arrives or a socket is ready → **sleep** in `curl_multi_poll` unless a
/// command is waiting (`Shared.polling` tells senders to wake it).
///
/// Why spin: a request/response exchange hands work across threads twice
/// (caller → loop, loop → caller), and on a virtual machine each sleep and
/// wake-up costs tens of microseconds — a Swift task and a thread in `poll`
/// passing a token back and forth measured 50 µs per round trip here, more
/// than nginx takes to answer a small GET. The next request of a caller
/// that just got its answer, and the answer to a request just sent, mostly
/// arrive within that time: caught while spinning, neither side sleeps,
/// and CPU time goes down too (`tools/bench session`, get-seq). A loop
/// with nothing to do does not spin, and a spin ends after its budget, so
/// an idle session costs nothing and each change to idle at most the budget;
/// at most one loop fewer than the machine's CPUs spins at a time. A spin
/// that ends without work burned its budget for nothing, so the loop then
/// skips spins of that kind for a while (`SpinPolicy`): callers that take
/// longer than the budget to send their next request do not pay it on every
/// request.
package final class CurlMulti: Sendable {
    /// A response head larger than this is refused: a server sending an
    /// endless head must not take memory without bound. 256 KiB is Chrome's
    /// limit, and below the 300 KB at which Debian's libcurl gives up with a
    /// less specific error.
    package static let maximumHeadBytes = 256 * 1024

    /// Identifies a transfer for `cancel` and `unpause`.
    package struct TransferID: Hashable, Sendable {
        package let raw: UInt64

        /// An identifier with this number (the transport numbers its
        /// transfers; state-machine tests make their own).
        package init(_ raw: UInt64) { self.raw = raw }
    }

    /// The loops, each a thread with its own multi handle; every origin's
    /// transfers go to one of them (see `loopIndex`).
    private let loops: [CurlLoop]

    /// The most loops a transport runs.
    package static let maximumLoops = 16

    /// Starts the loop threads.
    ///
    /// - Parameters:
    ///   - maximumConnectionsPerHost: Connections libcurl may open to
    ///     one host (Apple's default is 6).
    ///   - loops: Transport loops (threads), clamped to 1...`maximumLoops`.
    ///     With more than one, each origin (or proxy) stays on one loop, so
    ///     loops never multiply its connections, and the loops share DNS
    ///     answers and TLS sessions through a libcurl share object; with one,
    ///     there is no share object and nothing is routed.
    ///   - spins: Whether a loop spins after a turn that did work (see
    ///     above). Worth it when callers wait on each answer; a process
    ///     whose transfers nobody waits on one by one (transferd) keeps the
    ///     CPU for its other threads.
    /// - Throws: `CurlError` when libcurl cannot initialise.
    package init(maximumConnectionsPerHost: Int = 6, loops: Int = 1, spins: Bool = true) throws(CurlError) {
        try Curl.globalInit()
        let count = min(max(loops, 1), Self.maximumLoops)
        let share = count > 1 ? try CurlShare() : nil
        var made: [CurlLoop] = []
        do {
            for _ in 0..<count {
                made.append(try CurlLoop(maximumConnectionsPerHost: maximumConnectionsPerHost, share: share, spins: spins))
            }
        } catch {
            // Only out of memory: the loops made so far never ran.
            for loop in made { loop.discard() }
            throw error
        }
        self.loops = made
        for (index, loop) in made.enumerated() {
            loop.start(name: count == 1 ? "urlloading.curl" : "urlloading.curl.\(index)")
        }
    }

    deinit {
        shutdown()
    }

    /// Turns after which the loops would have spun, in all (for tests).
    package var spinsWanted: Int {
        loops.reduce(0) { $0 + $1.spinsWanted.load(ordering: .relaxed) }
    }

    /// How many loops this transport runs.
    package var loopCount: Int { loops.count }

    /// Starts a transfer; its events go to `observer` on the loop thread.
    /// The easy handle is configured here, on the caller's thread: the loop
    /// thread carries every transfer of its origins, and only adds it.
    /// After `shutdown`, the observer hears at once that it failed.
    @discardableResult
    package func start(_ request: TransferRequest, observer: any TransferObserver) -> TransferID {
        let index = Self.loopIndex(for: request, loops: loops.count)
        let loop = loops[index]
        let (number, idle) = loop.take()
        let id = TransferID(number &* UInt64(loops.count) &+ UInt64(index))
        let transfer: Transfer
        do {
            transfer = try Transfer(request: request, observer: observer, reusing: idle)
        } catch {
            observer.transferDidComplete(.failure(error))
            return id
        }
        if let share = loop.share { _ = urlloading_easy_setopt_pointer(transfer.handle, CURLOPT_SHARE, share.handle) }
        if !loop.send(.start(id, CurlLoop.HandOff(transfer: transfer), request.body)) {
            transfer.close()
            observer.transferDidComplete(.failure(.shutDown))
        }
        return id
    }

    /// Cancels a transfer; its observer hears `.cancelled` unless it already
    /// completed. Never waits for the loop.
    package func cancel(_ id: TransferID) {
        loop(of: id).send(.cancel(id))
    }

    /// Resumes a transfer whose observer refused a chunk.
    package func unpause(_ id: TransferID) {
        loop(of: id).send(.unpause(id))
    }

    /// Cancels every transfer and ends the threads.
    package func shutdown() {
        for loop in loops { loop.shutdown() }
    }

    private func loop(of id: TransferID) -> CurlLoop {
        loops[Int(id.raw % UInt64(loops.count))]
    }

    /// The loop a request's transfer runs on: by the proxy it goes through,
    /// else by its origin (scheme, host and port, in any case), so that one
    /// origin's connections are all in one loop's cache and its
    /// per-host limit holds. A stable hash (FNV-1a), so the choice is the
    /// same in every process.
    package static func loopIndex(for request: TransferRequest, loops: Int) -> Int {
        guard loops > 1 else { return 0 }
        let key = request.proxy.flatMap { $0.isEmpty ? nil : $0 } ?? request.url
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in originBytes(of: key) {
            hash = (hash ^ UInt64(byte | (byte >= 0x41 && byte <= 0x5A ? 0x20 : 0))) &* 0x0000_0100_0000_01B3
        }
        return Int(hash % UInt64(loops))
    }

    /// The "scheme://host[:port]" part of an absolute URL, without user
    /// information or the scheme's default port; the whole string when it
    /// has no "://".
    static func originBytes(of url: String) -> ArraySlice<UInt8> {
        let bytes = Array(url.utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), bytes[colon...].starts(with: "://".utf8) else {
            return bytes[...]
        }
        let authorityStart = colon + 3
        var end = bytes[authorityStart...].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? bytes.endIndex
        let hostStart = bytes[authorityStart..<end].lastIndex(of: UInt8(ascii: "@")).map { $0 + 1 } ?? authorityStart
        let scheme = String(decoding: bytes[..<colon], as: UTF8.self).lowercased()
        let defaultPort = scheme == "http" ? ":80" : scheme == "https" ? ":443" : nil
        if let defaultPort, bytes[hostStart..<end].reversed().starts(with: defaultPort.utf8.reversed()) {
            end -= defaultPort.utf8.count
        }
        return ArraySlice(bytes[..<authorityStart] + bytes[hostStart..<end])
    }
}
