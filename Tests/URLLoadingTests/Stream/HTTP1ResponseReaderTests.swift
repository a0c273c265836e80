import Foundation
import Testing
import Transport
@testable import URLLoading

/// The HTTP/1.1 response reader of the session's own connections, with bytes
/// only: framings, pieces of any size, hostile input, and the raw bytes
/// kept after the head for a hand-over.
struct HTTP1ResponseReaderTests {
    struct Outcome: Equatable {
        var statuses: [Int] = []
        var body: [UInt8] = []
        var ended = false
        var failure: String?
        var unread: [UInt8] = []
        var trailers: [String] = []
    }

    /// Feeds `wire` in pieces of `piece` bytes (then the end, when `closes`).
    static func read(_ wire: String, method: String = "GET", piece: Int, closes: Bool = false) -> Outcome {
        var reader = HTTP1ResponseReader(method: method, maximumHeadBytes: 4096)
        var outcome = Outcome()
        var bytes = Array(wire.utf8)[...]
        var endSent = false
        while true {
            switch reader.next() {
            case .needMore:
                if bytes.isEmpty {
                    guard closes, !endSent else { return outcome }
                    reader.appendEnd()
                    endSent = true
                    continue
                }
                reader.append(bytes.prefix(piece))
                bytes = bytes.dropFirst(piece)
            case .interim(let head): outcome.statuses.append(head.status)
            case .head(let head): outcome.statuses.append(head.status)
            case .body(let chunk): outcome.body += chunk
            case .end:
                outcome.ended = true
                outcome.unread = Array(reader.unread) + Array(bytes)
                outcome.trailers = reader.trailers.map { "\($0.name)=\($0.value)" }
                return outcome
            case .failed(let error):
                outcome.failure = error.message
                return outcome
            }
        }
    }

    @Test("Content-Length, chunked (extensions, trailers) and close-delimited bodies, in pieces of 1, 3 and all bytes")
    func framings() {
        for piece in [1, 3, 10_000] {
            let length = Self.read("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloNEXT", piece: piece)
            #expect(length == Outcome(statuses: [200], body: Array("hello".utf8), ended: true, unread: Array("NEXT".utf8)), "\(piece)")
            let chunked = Self.read(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3;x=y\r\nabc\r\nA\r\n0123456789\r\n0\r\nTrailer: t\r\n\r\n", piece: piece)
            #expect(chunked == Outcome(statuses: [200], body: Array("abc0123456789".utf8), ended: true, trailers: ["Trailer=t"]), "\(piece)")
            let untilClose = Self.read("HTTP/1.1 200 OK\r\n\r\nto the end", piece: piece, closes: true)
            #expect(untilClose == Outcome(statuses: [200], body: Array("to the end".utf8), ended: true), "\(piece)")
        }
    }

    @Test("The last transfer coding is found by comma bytes: a comma after a Prepend character (one Character with it) still separates")
    func lastCodingByBytes() {
        let chunked = Self.read("HTTP/1.1 200 OK\r\nTransfer-Encoding: x\u{0600},chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", piece: 10_000)
        #expect(chunked == Outcome(statuses: [200], body: Array("abc".utf8), ended: true))
    }

    @Test("No body for HEAD, 204 and 304; a 100 before the final head is interim; after a 101 every byte is the next protocol's")
    func noBody() {
        #expect(Self.read("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", method: "HEAD", piece: 7).ended)
        #expect(Self.read("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n", piece: 7).ended)
        #expect(Self.read("HTTP/1.1 304 Not Modified\r\n\r\n", piece: 7).ended)
        let continued = Self.read("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", piece: 5)
        #expect(continued == Outcome(statuses: [100, 200], body: Array("ok".utf8), ended: true))
        let switched = Self.read("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\nframes", piece: 10_000)
        #expect(switched == Outcome(statuses: [101], ended: true, unread: Array("frames".utf8)))
    }

    @Test("A step taken on a copy and dropped leaves every byte after the head unread (what a hand-over begins with)")
    func trialSteps() {
        var reader = HTTP1ResponseReader(method: "GET", maximumHeadBytes: 4096)
        reader.append(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n".utf8))
        guard case .head = reader.next() else { Issue.record("no head"); return }
        var trial = reader
        guard case .body(let bytes) = trial.next() else { Issue.record("no body"); return }
        #expect(Array(bytes) == Array("hello".utf8))
        #expect(Array(reader.unread) == Array("5\r\nhello\r\n".utf8))
        #expect(Array(trial.unread) == Array("\r\n".utf8))
    }

    @Test("Hostile answers fail cleanly: lying or conflicting lengths, bad chunk sizes, a chunk longer than its size, endless lines, a head past its bound")
    func hostile() {
        let cases: [(String, Bool, String)] = [
            ("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", true, "closed 5 bytes before"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", false, "malformed Content-Length"),
            ("HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n", false, "malformed Content-Length"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", false, "malformed Content-Length"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false, "malformed chunk size"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\n", false, "malformed chunk size"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", false, "longer than its size"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab", true, "closed inside the chunked body"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", true, "closed inside a chunk"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + String(repeating: "1", count: 9000), false, "longer than 8192"),
            ("HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: 5000) + "\r\n\r\n", false, "exceed"),
            ("HTTP/1.1 200 OK\r\nContent-Le", true, "before the response's head ended"),
            ("garbage\r\n\r\n", false, "malformed"),
        ]
        for (wire, closes, message) in cases {
            let outcome = Self.read(wire, piece: 64, closes: closes)
            #expect(outcome.failure?.contains(message) == true, "\(wire.prefix(60)): \(outcome)")
        }
    }

    @Test("Chunk sizes: hex of either case, extensions ignored, at most 15 digits")
    func chunkSizes() {
        #expect(HTTP1ResponseReader.chunkSize(Array("1aF".utf8)[...]) == 0x1AF)
        #expect(HTTP1ResponseReader.chunkSize(Array("10 ; name=value".utf8)[...]) == 16)
        #expect(HTTP1ResponseReader.chunkSize(Array("FFFFFFFFFFFFFFF".utf8)[...]) == 0xFFF_FFFF_FFFF_FFFF)
        #expect(HTTP1ResponseReader.chunkSize(Array("1000000000000000".utf8)[...]) == nil)
        #expect(HTTP1ResponseReader.chunkSize(Array("".utf8)[...]) == nil)
        #expect(HTTP1ResponseReader.chunkSize(Array("-1".utf8)[...]) == nil)
    }
}
