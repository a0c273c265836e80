import Foundation
import Locking
import Streams

/// The read side of a captured connection: bytes come from one read in
/// flight at a time into a buffer that `read(_:maxLength:)` empties.
final class CapturedInputSource: Sendable {
    enum Taken {
        case bytes(Int)
        case end
        case failed(StreamError)
    }

    private struct State {
        var pending: [UInt8] = []
        var offset = 0
        var atEnd = false
        var failure: StreamError?
        var fetching = false
        var waiting: [DispatchSemaphore] = []
        /// Posts the stream's event after a read ended, when it is scheduled.
        var notify: (@Sendable () -> Void)?
        var hasBytes: Bool { offset < pending.count }
    }

    let connection: StreamConnection
    private let state: Lock<State>

    init(_ connection: StreamConnection, leftover: [UInt8]) {
        self.connection = connection
        self.state = Lock(State(pending: leftover))
    }

    /// Whether a read may find bytes without waiting for the end.
    var mayHaveBytes: Bool { state.withLock { $0.hasBytes || (!$0.atEnd && $0.failure == nil) } }
    /// Bytes are buffered now.
    var hasBufferedBytes: Bool { state.withLock { $0.hasBytes } }

    /// The event a finished read calls for.
    var eventAfterRead: Stream.Event {
        state.withLock { $0.hasBytes ? .hasBytesAvailable : $0.failure != nil ? .errorOccurred : .endEncountered }
    }

    /// Why reading failed, if it did.
    var failure: StreamError? { state.withLock { $0.failure } }

    func setNotify(_ notify: (@Sendable () -> Void)?) { state.withLock { $0.notify = notify } }

    /// Starts a read unless one is in flight, bytes wait, or the input ended.
    func fetch() {
        let start = state.withLock { state -> Bool in
            guard !state.fetching, !state.hasBytes, !state.atEnd, state.failure == nil else { return false }
            state.fetching = true
            return true
        }
        guard start else { return }
        connection.read(minimum: 1, maximum: 64 * 1024, timeout: nil) { [self] result in
            let (waiting, notify) = state.withLock { state -> ([DispatchSemaphore], (@Sendable () -> Void)?) in
                state.fetching = false
                switch result {
                case .success(let read):
                    if state.offset == state.pending.count { (state.pending, state.offset) = ([], 0) }
                    state.pending.append(contentsOf: read.data)
                    state.atEnd = read.atEOF
                case .failure(let error):
                    state.failure = error
                }
                defer { state.waiting = [] }
                return (state.waiting, state.notify)
            }
            waiting.forEach { $0.signal() }
            notify?()
        }
    }

    /// Copies at most `maximum` bytes into `buffer`, waiting for some
    /// (or the end, or a failure) when none is buffered.
    func take(into buffer: UnsafeMutablePointer<UInt8>, maximum: Int) -> Taken {
        while true {
            let semaphore = DispatchSemaphore(value: 0)
            let taken = state.withLock { state -> Taken? in
                if state.hasBytes {
                    let count = min(maximum, state.pending.count - state.offset)
                    state.pending.withUnsafeBufferPointer { source in
                        if let base = source.baseAddress { buffer.update(from: base + state.offset, count: count) }
                    }
                    state.offset += count
                    return .bytes(count)
                }
                if let failure = state.failure { return .failed(failure) }
                if state.atEnd { return .end }
                state.waiting.append(semaphore)
                return nil
            }
            if let taken { return taken }
            fetch()
            semaphore.wait()
        }
    }
}

/// Posts stream events on the run loop a stream is scheduled in. A copy
/// crosses to the connection's loop thread: adding a timer to a run loop from
/// any thread is safe (CFRunLoop locks itself), and nothing else is used there.
struct StreamEventPoster: @unchecked Sendable {
    var runLoop: RunLoop?
    var modes: [RunLoop.Mode] = []

    /// Calls `deliver` on the scheduled run loop (nothing when unscheduled).
    func post(_ deliver: @escaping @Sendable () -> Void) {
        guard let runLoop else { return }
        // A timer added from any thread wakes the run loop (a performed block does not).
        let timer = Timer(timeInterval: 0, repeats: false) { _ in deliver() }
        for mode in modes { runLoop.add(timer, forMode: mode) }
    }
}

/// A weak reference to a stream that crosses to the run loop's thread,
/// where the app uses the stream.
private struct StreamReference: @unchecked Sendable {
    weak var stream: Stream?
}

/// The input half of `SessionStreamTask.captureStreams()`: reads block
/// until bytes arrive (or the end); scheduled in a run loop with a delegate,
/// it posts `hasBytesAvailable`, `endEncountered` and `errorOccurred` there.
final class StreamTaskInputStream: InputStream {
    private let source: CapturedInputSource
    private var status = Stream.Status.notOpen
    private var failure: (any Error)?
    private var poster = StreamEventPoster()
    private weak var eventDelegate: (any StreamDelegate)?
    private let describe: @Sendable (StreamError) -> any Error

    init(_ source: CapturedInputSource, describe: @escaping @Sendable (StreamError) -> any Error) {
        self.source = source
        self.describe = describe
        super.init(data: Data())
    }

    override var streamStatus: Stream.Status { status }
    override var streamError: (any Error)? { failure }
    override var delegate: (any StreamDelegate)? {
        get { eventDelegate }
        set { eventDelegate = newValue }
    }

    override func open() {
        guard status == .notOpen else { return }
        status = .open
        post(.openCompleted)
        armEvents()
    }

    override func close() {
        guard status != .closed else { return }
        status = .closed
        source.setNotify(nil)
        source.connection.closeRead()
    }

    override var hasBytesAvailable: Bool { status == .open && source.mayHaveBytes }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        guard status == .open || status == .reading else { return status == .atEnd ? 0 : -1 }
        guard len > 0 else { return 0 }
        status = .reading
        let taken = source.take(into: buffer, maximum: len)
        switch taken {
        case .bytes(let count):
            status = .open
            if poster.runLoop != nil {
                if source.hasBufferedBytes { post(.hasBytesAvailable) } else { source.fetch() }
            }
            return count
        case .end:
            status = .atEnd
            return 0
        case .failed(let error):
            status = .error
            failure = describe(error)
            return -1
        }
    }

    override func getBuffer(_ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length len: UnsafeMutablePointer<Int>) -> Bool {
        false
    }

    override func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        poster.runLoop = aRunLoop
        if !poster.modes.contains(mode) { poster.modes.append(mode) }
        armEvents()
    }

    override func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        poster.modes.removeAll { $0 == mode }
        if poster.modes.isEmpty { poster.runLoop = nil }
        armEvents()
    }

    /// Scheduled and open: each read that ends posts its event.
    private func armEvents() {
        guard poster.runLoop != nil, status == .open else { return source.setNotify(nil) }
        let (poster, reference, source) = (poster, StreamReference(stream: self), source)
        source.setNotify {
            let event = source.eventAfterRead
            poster.post { (reference.stream as? StreamTaskInputStream)?.deliver(event) }
        }
        if source.hasBufferedBytes { post(.hasBytesAvailable) } else { source.fetch() }
    }

    private func post(_ event: Stream.Event) {
        let reference = StreamReference(stream: self)
        poster.post { (reference.stream as? StreamTaskInputStream)?.deliver(event) }
    }

    /// On the run loop's thread: a failure shows in the status first.
    private func deliver(_ event: Stream.Event) {
        guard status == .open else { return }
        if event == .errorOccurred, let error = source.failure {
            status = .error
            failure = describe(error)
        }
        eventDelegate?.stream(self, handle: event)
    }
}

/// The output half of `SessionStreamTask.captureStreams()`: a write
/// returns once the system took all of it; scheduled in a run loop with a
/// delegate, it posts `hasSpaceAvailable` after opening and after each write.
final class StreamTaskOutputStream: OutputStream {
    private let connection: StreamConnection?
    private var status = Stream.Status.notOpen
    private var failure: (any Error)?
    private var poster = StreamEventPoster()
    private weak var eventDelegate: (any StreamDelegate)?
    private let describe: @Sendable (StreamError) -> any Error

    init(_ connection: StreamConnection, describe: @escaping @Sendable (StreamError) -> any Error) {
        self.connection = connection
        self.describe = describe
        super.init(toMemory: ())
    }

    /// Foundation requires it of subclasses; such a stream has no connection and every write fails.
    required init(toMemory: ()) {
        self.connection = nil
        self.describe = { $0 }
        super.init(toMemory: ())
    }

    override var streamStatus: Stream.Status { status }
    override var streamError: (any Error)? { failure }
    override var delegate: (any StreamDelegate)? {
        get { eventDelegate }
        set { eventDelegate = newValue }
    }

    override func open() {
        guard status == .notOpen else { return }
        status = .open
        post(.openCompleted)
        post(.hasSpaceAvailable)
    }

    override func close() {
        guard status != .closed else { return }
        status = .closed
        connection?.closeWrite { _ in }
    }

    override var hasSpaceAvailable: Bool { status == .open }

    override func write(_ buffer: UnsafePointer<UInt8>, maxLength len: Int) -> Int {
        guard status == .open, let connection else { return -1 }
        guard len > 0 else { return 0 }
        status = .writing
        let semaphore = DispatchSemaphore(value: 0)
        let outcome = Lock<StreamError?>(nil)
        connection.write(Data(bytes: buffer, count: len), timeout: nil) { error in
            outcome.withLock { $0 = error }
            semaphore.signal()
        }
        semaphore.wait()
        if let error = outcome.withLock({ $0 }) {
            status = .error
            failure = describe(error)
            post(.errorOccurred)
            return -1
        }
        status = .open
        post(.hasSpaceAvailable)
        return len
    }

    override func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        poster.runLoop = aRunLoop
        if !poster.modes.contains(mode) { poster.modes.append(mode) }
        if status == .open { post(.hasSpaceAvailable) }
    }

    override func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        poster.modes.removeAll { $0 == mode }
        if poster.modes.isEmpty { poster.runLoop = nil }
    }

    private func post(_ event: Stream.Event) {
        let reference = StreamReference(stream: self)
        poster.post {
            guard let stream = reference.stream as? StreamTaskOutputStream, stream.status != .closed else { return }
            stream.eventDelegate?.stream(stream, handle: event)
        }
    }
}
