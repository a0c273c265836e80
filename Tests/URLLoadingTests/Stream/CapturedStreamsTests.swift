import Foundation
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// `captureStreams()`: the connection handed over as an
/// InputStream and OutputStream, used blocking and from a run loop.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2))))
struct CapturedStreamsTests {
    /// Keeps the streams the delegate is given, in order with the task's other calls.
    final class Capturer: SessionStreamDelegate, Sendable {
        let calls = Lock<[String]>([])
        let streams = Lock<StreamPair?>(nil)
        func urlSession(_ session: Session, streamTask: SessionStreamTask, didBecome inputStream: InputStream, outputStream: OutputStream) {
            calls.withLock { $0.append("captured") }
            streams.withLock { $0 = StreamPair(input: inputStream, output: outputStream) }
        }
    }

    /// Streams are not Sendable; the test hands them to one thread at a time.
    struct StreamPair: @unchecked Sendable {
        let input: InputStream
        let output: OutputStream
    }

    /// Runs blocking stream work on a thread of its own.
    static func onThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: work()) }
            thread.start()
        }
    }

    /// Reads until the stream ends (or fails): the bytes and the last status.
    static func readToEnd(_ input: InputStream) -> ([UInt8], Stream.Status) {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = input.read(&buffer, maxLength: buffer.count)
            if count <= 0 { return (bytes, input.streamStatus) }
            bytes += buffer[..<count]
        }
    }

    static func write(_ text: String, to output: OutputStream) -> Int {
        let bytes = Array(text.utf8)
        return output.write(bytes, maxLength: bytes.count)
    }

    @Test("captureStreams: the write and read queued before it finish first; then blocking writes and reads on the streams; closing the output is the server's end of input")
    func blocking() async throws {
        let server = try await TestStreamServer.start()
        let capturer = Capturer()
        let session = Session(configuration: .ephemeral, delegate: capturer)
        let task = session.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        task.write(StreamTaskTests.line("one"), timeout: 10) { _ in }
        task.readData(ofMinLength: 11, maxLength: 11, timeout: StreamTaskTests.bound) { data, _, error in
            capturer.calls.withLock { $0.append(error.map { "read failed: \($0)" } ?? "read \(String(decoding: data ?? Data(), as: UTF8.self))") }
        }
        task.captureStreams()
        #expect(await eventually { capturer.streams.withLock { $0 != nil } })
        #expect(capturer.calls.withLock { $0 } == ["read echo: one\r\n", "captured"])
        #expect(task.state == .completed)
        let later = await #expect(throws: URLError.self) { try await task.write(StreamTaskTests.line("late"), timeout: 10) }
        #expect(later?.code == .cancelled)

        let pair = try #require(capturer.streams.withLock { $0 })
        let (wrote, read, status) = await Self.onThread {
            pair.input.open()
            pair.output.open()
            let wrote = Self.write("two\r\n", to: pair.output)
            pair.output.close()
            let (read, status) = Self.readToEnd(pair.input)
            pair.input.close()
            return (wrote, read, status)
        }
        #expect(wrote == 5)
        #expect(String(decoding: read, as: UTF8.self) == "echo: two\r\nEOF\r\n" && status == .atEnd)
        #expect(server.received == ["one", "two"])
        try await server.shutdown()
    }

    /// A stream delegate on a run loop's thread: writes once there is
    /// space, reads what arrives, closes its output after the echo.
    final class RunLoopClient: NSObject, StreamDelegate, @unchecked Sendable {
        let input: InputStream
        let output: OutputStream
        private(set) var events: [String] = []
        private(set) var received: [UInt8] = []
        private var wrote = false
        var done = false

        init(_ pair: StreamPair) {
            (input, output) = (pair.input, pair.output)
        }

        func stream(_ aStream: Stream, handle eventCode: Stream.Event) {
            let side = aStream === input ? "in" : "out"
            switch eventCode {
            case .openCompleted: events.append("\(side) open")
            case .hasSpaceAvailable:
                guard !wrote else { return }
                wrote = true
                events.append("out space")
                _ = CapturedStreamsTests.write("hello\r\n", to: output)
            case .hasBytesAvailable:
                if events.last != "in bytes" { events.append("in bytes") }
                var buffer = [UInt8](repeating: 0, count: 4)
                let count = input.read(&buffer, maxLength: buffer.count)
                if count > 0 { received += buffer[..<count] }
                if String(decoding: received, as: UTF8.self) == "echo: hello\r\n" { output.close() }
            case .endEncountered:
                events.append("in end")
                done = true
            case .errorOccurred:
                events.append("\(side) error")
                done = true
            default: break
            }
        }
    }

    @Test("Streams scheduled in a run loop post openCompleted, hasSpaceAvailable, hasBytesAvailable (again while bytes are left) and endEncountered there")
    func runLoop() async throws {
        let server = try await TestStreamServer.start()
        let capturer = Capturer()
        let session = Session(configuration: .ephemeral, delegate: capturer)
        let task = session.streamTask(withHostName: "127.0.0.1", port: server.port)
        task.resume()
        task.captureStreams()
        #expect(await eventually { capturer.streams.withLock { $0 != nil } })
        let pair = try #require(capturer.streams.withLock { $0 })
        let (events, received, finished) = await Self.onThread { () -> ([String], String, Bool) in
            let client = RunLoopClient(pair)
            let runLoop = RunLoop.current
            // Keeps the run loop from returning at once while nothing is scheduled.
            let keepAlive = Timer(timeInterval: 0.05, repeats: true) { _ in }
            runLoop.add(keepAlive, forMode: .default)
            for stream in [client.input, client.output] as [Stream] {
                stream.delegate = client
                stream.schedule(in: runLoop, forMode: .default)
                stream.open()
            }
            let deadline = Date().addingTimeInterval(20)
            while !client.done, Date() < deadline { _ = runLoop.run(mode: .default, before: Date().addingTimeInterval(0.1)) }
            keepAlive.invalidate()
            client.input.close()
            return (client.events, String(decoding: client.received, as: UTF8.self), client.done)
        }
        #expect(finished)
        #expect(received == "echo: hello\r\nEOF\r\n")
        #expect(Set(events.prefix(3)) == ["in open", "out open", "out space"], "\(events)")
        #expect(events.suffix(2) == ["in bytes", "in end"], "\(events)")
        try await server.shutdown()
    }
}
