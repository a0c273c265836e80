import Foundation
import Testing
@testable import Transport

/// The response-head parser with bytes, no sockets.
@Suite struct ResponseHeadParserTests {
    static func feed(_ lines: [String], limit: Int = 1 << 16) -> (ResponseHeadParser, [ResponseHeadParser.Event]) {
        var parser = ResponseHeadParser(maximumBytes: limit)
        var events: [ResponseHeadParser.Event] = []
        for line in lines {
            let bytes = Array(line.utf8)
            events.append(bytes.withUnsafeBytes { parser.line($0) })
        }
        return (parser, events)
    }

    @Test("A head: status, version, fields in order with names' case kept; interim heads reported, then forgotten; obs-fold joined")
    func heads() throws {
        let (parser, events) = Self.feed([
            "HTTP/1.1 100 Continue\r\n", "\r\n",
            "HTTP/1.1 200 OK\r\n", "Content-Type: text/plain\r\n", "X-Folded: a\r\n", "\t b\r\n", "x-empty:\r\n", "\r\n",
        ])
        #expect(events.last == .endOfHead && !events.contains { if case .failed = $0 { true } else { false } })
        let head = try #require(parser.finalHead)
        #expect(head.status == 200 && head.httpVersion == "HTTP/1.1")
        #expect(head.headers.map { "\($0.name)=\($0.value)" } == ["Content-Type=text/plain", "X-Folded=a b", "x-empty="])
        let (interimOnly, interimEvents) = Self.feed(["HTTP/1.1 103 Early Hints\r\n", "Link: </a>\r\n", "\r\n"])
        #expect(interimOnly.finalHead == nil)
        // The interim head is reported whole at its blank line, then forgotten.
        guard case .interimHead(let interim) = interimEvents.last else {
            Issue.record("no interim head event: \(interimEvents)")
            return
        }
        #expect(interim.status == 103 && interim.headers.map(\.value) == ["</a>"])
        #expect(events[1] == .interimHead(ResponseHead(status: 100, httpVersion: "HTTP/1.1", headers: [], reasonPhrase: "Continue")))
        #expect(head.reasonPhrase == "OK")
        // A status line without a reason, or with runs of spaces, is one; the
        // reason phrase is the rest of the line, spaces inside it kept.
        for (line, status, version, reason) in [
            ("HTTP/1.1 204\r\n", 204, "HTTP/1.1", ""), ("HTTP/1.0  301   Moved  \r\n", 301, "HTTP/1.0", "Moved"), ("HTTP/2 200\r\n", 200, "HTTP/2", ""),
            ("HTTP/1.1 418 I'm a teapot\r\n", 418, "HTTP/1.1", "I'm a teapot"), ("HTTP/1.1 200 \r\n", 200, "HTTP/1.1", ""),
        ] {
            let (parsed, _) = Self.feed([line, "\r\n"])
            #expect(parsed.finalHead?.status == status && parsed.finalHead?.httpVersion == version, "\(line)")
            #expect(parsed.finalHead?.reasonPhrase == reason, "\(line)")
        }
    }

    @Test("Lines after the final head are a chunked body's trailers: kept apart from the head's fields, malformed ones dropped, bounded by the same limit")
    func trailers() throws {
        let (parser, events) = Self.feed([
            "HTTP/1.1 200 OK\r\n", "Trailer: X-Checksum\r\n", "\r\n",
            "X-Checksum:  abc \r\n", "no colon\r\n", " folded\r\n", "X-Other: 1\r\n", "\r\n",
        ])
        #expect(events == [.none, .none, .endOfHead, .none, .none, .none, .none, .endOfTrailers])
        #expect(try #require(parser.finalHead).headers.map(\.name) == ["Trailer"])
        #expect(parser.trailers.map { "\($0.name)=\($0.value)" } == ["X-Checksum=abc", "X-Other=1"])
        // A status line after a final head begins another response (libcurl's NTLM rounds on one transfer).
        let (rounds, roundEvents) = Self.feed([
            "HTTP/1.1 401 Unauthorized\r\n", "WWW-Authenticate: NTLM\r\n", "\r\n", "HTTP/1.1 200 OK\r\n", "X-Final: yes\r\n", "\r\n",
        ])
        #expect(roundEvents.last == .endOfHead && rounds.finalHead?.status == 200 && rounds.trailers.isEmpty)
        #expect(rounds.finalHead?.headers.map(\.name) == ["X-Final"])
        let (_, endless) = Self.feed(["HTTP/1.1 200 OK\r\n", "\r\n"] + Array(repeating: "X-Trailer: 0123456789\r\n", count: 100), limit: 1000)
        #expect(endless.last == .failed(.headTooLarge(1000)))
    }

    @Test("Malformed status and field lines, and heads past the limit, fail the transfer")
    func failures() {
        for lines in [
            ["HTTP/1.1 2000 OK\r\n"], ["HTTP/1.1 abc\r\n"], ["HTTP/1.1\r\n"], ["HTTP/1.1 200 OK\r\n", "No colon here\r\n"],
            ["HTTP/1.1 200OK\r\n"], ["HTTP/1.1 20 OK\r\n"], ["HTTP/1.1 0200 OK\r\n"], ["HTTP/1.1 +20 OK\r\n"], ["HTTP/1.1\t200 OK\r\n"],
            ["HTTP/1.1 099 Low\r\n"],
            ["HTTP/1.1 200 OK\r\n", "Bad Name: x\r\n"], ["HTTP/1.1 200 OK\r\n", ": empty name\r\n"],
        ] {
            let (_, events) = Self.feed(lines)
            guard case .failed(let error) = events.last else {
                Issue.record("accepted \(lines)")
                continue
            }
            #expect(error.failure == .badResponse)
        }
        let (_, events) = Self.feed(["HTTP/1.1 200 OK\r\n", "X-Long: " + String(repeating: "a", count: 100) + "\r\n"], limit: 64)
        #expect(events.last == .failed(.headTooLarge(64)))
    }

    @Test("A content or transfer coding libcurl does not decode is reported, known ones are not")
    func codings() {
        let (_, events) = Self.feed([
            "HTTP/1.1 200 OK\r\n", "Content-Encoding: gzip\r\n", "Content-Encoding: x-custom\r\n", "Transfer-Encoding: chunked\r\n",
        ])
        #expect(events == [.none, .none, .undecodableCoding, .none])
    }
}
