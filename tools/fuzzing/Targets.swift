// libFuzzer targets for every parser that reads network or disk input
// (network and disk input alike). Built by tools/fuzz with `swiftc -sanitize=fuzzer
// -parse-as-library` against a fuzzer-instrumented debug build of the
// package; the target is chosen by $URLLOADING_FUZZ_TARGET. A crash, a trap
// or a broken invariant (parse, print, parse again gives the same) is a
// finding: libFuzzer stops and writes the input to the artifact folder.
import Foundation
@testable import Transport
@testable import URLLoading

/// One fuzz target: its name and what it does with an input.
struct FuzzTarget {
    let name: String
    let run: (Data) -> Void
}

/// Stops the run with the broken invariant: libFuzzer reports the input.
func invariant(_ holds: Bool, _ what: @autoclosure () -> String) {
    if !holds {
        FileHandle.standardError.write(Data("invariant broken: \(what())\n".utf8))
        abort()
    }
}

func text(_ data: Data) -> String { String(decoding: data, as: UTF8.self) }
func lines(_ data: Data) -> [String] { text(data).split(separator: "\n", omittingEmptySubsequences: false).map(String.init) }

let targets: [FuzzTarget] = [
    FuzzTarget(name: "cache-control") { data in
        let control = CacheControl(lines(data))
        for name in ["max-age", "s-maxage", "stale-while-revalidate", "stale-if-error", "min-fresh", "max-stale"] {
            _ = control.seconds(name)
        }
        _ = control.has("no-store")
    },
    FuzzTarget(name: "http-date") { data in
        guard let seconds = HTTPDate.parse(text(data)) else { return }
        invariant(seconds.isFinite, "a parsed date is finite")
        let printed = HTTPDate.format(seconds)
        invariant(HTTPDate.parse(printed) == seconds, "format(parse(x)) parses to the same instant: \(printed)")
    },
    FuzzTarget(name: "cookie-date") { data in
        guard let seconds = CookieDate.parse(text(data)) else { return }
        invariant(seconds.isFinite, "a parsed cookie date is finite")
    },
    FuzzTarget(name: "age") { data in
        guard let age = CachePolicy.ageValue(HeaderFields([HeaderFields.Field("Age", text(data))])) else { return }
        invariant(age >= 0 && age <= Double(CacheControl.maximumSeconds), "an Age is within 0...2^31")
    },
    FuzzTarget(name: "vary") { data in
        let headers = HeaderFields(lines(data).map { HeaderFields.Field("Vary", $0) })
        guard let names = CachePolicy.varyFields(headers) else { return }
        // All names come back (a response naming more than the cache
        // compares is refused when stored, not cut short here), each once,
        // lower case, trimmed, never empty nor holding a comma.
        invariant(Set(names).count == names.count, "each Vary name comes once")
        invariant(
            names.allSatisfy { name in
                !name.isEmpty && !name.contains(",") && !name.utf8.contains { (0x41...0x5A).contains($0) }
                    && name.first != " " && name.first != "\t" && name.last != " " && name.last != "\t"
            }, "Vary names are lower case, trimmed, without commas")
        if names.count > CachePolicy.maximumVaryFields {
            let response = HeaderFields(headers.fields + [HeaderFields.Field("Cache-Control", "max-age=60")])
            let verdict = CachePolicy.storability(method: "GET", requestHeaders: HeaderFields([]), status: 200, responseHeaders: response)
            invariant(!verdict.allowed, "a response naming more Vary fields than the cache compares is not stored")
        }
    },
    FuzzTarget(name: "field-list") { data in
        let value = text(data)
        for quoted in [false, true] {
            let members = FieldList.members(value, quoted: quoted)
            // Members are never empty nor padded; joined by commas they
            // read back the same; a token list's members hold no comma.
            invariant(
                members.allSatisfy { member in
                    let bytes = Array(member.utf8)
                    return !bytes.isEmpty && ![0x20, 0x09].contains(bytes[0]) && ![0x20, 0x09].contains(bytes[bytes.count - 1])
                }, "list members are non-empty and trimmed")
            let again = FieldList.members(members.joined(separator: ","), quoted: quoted)
            invariant(again.map(String.init) == members.map(String.init), "a list joined by commas reads back the same")
            if !quoted || !value.utf8.contains(UInt8(ascii: "\"")) {
                invariant(members.allSatisfy { !$0.utf8.contains(UInt8(ascii: ",")) }, "no member of a token list holds a comma")
            }
            invariant(
                FieldList.first(value, quoted: quoted) == members.first && FieldList.last(value, quoted: quoted) == members.last,
                "first and last agree with the members")
        }
    },
    FuzzTarget(name: "set-cookie") { data in
        guard let cookie = SetCookie(text(data)) else { return }
        // RFC 6265bis §5.7: a string with a control character (but HTAB) makes no cookie.
        let control = (cookie.name + cookie.value).unicodeScalars.contains { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F }
        invariant(!control, "a cookie's name and value hold no control character")
    },
    FuzzTarget(name: "cookies-txt") { data in
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let (cookies, _) = NetscapeCookieFile.parse(text(data), now: now)
        for cookie in cookies {
            let fields = cookie.name + cookie.value + cookie.domain + cookie.path
            invariant(!fields.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "no control character in an imported cookie")
        }
        let again = NetscapeCookieFile.parse(NetscapeCookieFile.serialize(cookies), now: now).cookies
        invariant(again.count == cookies.count, "serialize then parse keeps every cookie (\(cookies.count) → \(again.count))")
    },
    FuzzTarget(name: "netrc") { data in
        _ = Netrc.parse(text(data))
    },
    FuzzTarget(name: "authenticate") { data in
        for challenge in AuthChallenge.parse(lines(data)) { _ = DigestChallenge(challenge) }
    },
    FuzzTarget(name: "response-head") { data in
        var parser = ResponseHeadParser(maximumBytes: 64 * 1024)
        var start = data.startIndex
        while start < data.endIndex {
            let end = data[start...].firstIndex(of: 0x0A).map { $0 + 1 } ?? data.endIndex
            let event = data[start..<end].withUnsafeBytes { parser.line($0) }
            // Past the final head too: trailers, and the next round's head.
            if case .failed = event { return }
            start = end
        }
    },
    FuzzTarget(name: "mixed-replace") { data in
        var parser = MixedReplaceParser(boundary: "b")
        let cut = data.isEmpty ? 0 : Int(data[data.startIndex]) % (data.count + 1)
        do {
            _ = try data.prefix(cut).withUnsafeBytes { try parser.feed($0) }
            _ = try data.dropFirst(cut).withUnsafeBytes { try parser.feed($0) }
        } catch {
            return
        }
        _ = parser.finish()
    },
    FuzzTarget(name: "body-text") { data in
        // A streamed body read as lines, scalars and characters, cut in two
        // where the first byte says: the same as reading it whole.
        let cut = data.isEmpty ? 0 : Int(data[data.startIndex]) % (data.count + 1)
        func decoded<Decoder: ChunkDecoder>(_: Decoder.Type, cuts: [Int]) -> [Decoder.Output] {
            var decoder = Decoder()
            var start = data.startIndex
            var output: [Decoder.Output] = []
            for end in cuts.map({ data.startIndex + $0 }) + [data.endIndex] {
                output += decoder.take(Data(data[start..<end]))
                start = end
            }
            return output + decoder.finish()
        }
        let whole = String(decoding: data, as: UTF8.self)
        invariant(decoded(ScalarDecoder.self, cuts: [cut]) == Array(whole.unicodeScalars), "scalars read in two chunks are the whole body's")
        invariant(decoded(CharacterDecoder.self, cuts: [cut]) == Array(whole), "characters read in two chunks are the whole body's")
        let lines = decoded(LineSplitter.self, cuts: [cut])
        invariant(lines == decoded(LineSplitter.self, cuts: []), "lines read in two chunks are the whole body's")
        let breaks: Set<Unicode.Scalar> = ["\n", "\r", "\u{0B}", "\u{0C}", "\u{85}", "\u{2028}", "\u{2029}"]
        invariant(lines.allSatisfy { !$0.isEmpty && !$0.unicodeScalars.contains(where: breaks.contains) }, "no line is empty or holds a break")
    },
    FuzzTarget(name: "resume-data") { data in
        _ = try? ResumeData.decode(data, directory: URL(fileURLWithPath: "/nonexistent-urlloading-fuzz"))
    },
    FuzzTarget(name: "upload-resume-data") { data in
        // An upload's resume data: whatever the bytes, a clear refusal or a
        // blob whose numbers are within the body and whose URLs share an origin.
        guard let resume = try? UploadResumeData.decode(data, directory: URL(fileURLWithPath: "/nonexistent-urlloading-fuzz")) else { return }
        invariant((0...resume.length).contains(resume.offset) && resume.start >= 0, "an accepted blob's offset is within its body")
        invariant(
            URL(string: resume.url).flatMap { url in URL(string: resume.resumptionURL).map { ResumableUpload.sameOrigin($0, url) } } == true,
            "an accepted blob's resumption URL is on the upload's origin")
    },
    FuzzTarget(name: "background-frame") { data in
        // transferd's socket: bytes in any split, every message
        // out is within bounds and frames again to itself.
        // The first byte says where the rest is split in two reads.
        var framing = BackgroundFraming()
        let bytes = data.dropFirst()
        let cut = data.isEmpty ? 0 : Int(data[data.startIndex]) % (bytes.count + 1)
        for piece in [bytes.prefix(cut), bytes.dropFirst(cut)] {
            framing.append(Data(piece))
            while true {
                guard let message = try? framing.next() else { break }
                invariant((try? message.check()) != nil, "a message read is within bounds")
                for compact in [false, true] {
                    var again = BackgroundFraming()
                    guard let frame = try? BackgroundFraming.encode(message, compact: compact) else {
                        return invariant(false, "a message read can be framed")
                    }
                    again.append(frame)
                    invariant((try? again.next()) == message, "frame(read(x)) reads as the same message, in JSON and compact frames")
                }
            }
        }
    },
    FuzzTarget(name: "websocket-frame") { data in
        // RFC 6455 frames from a peer: bytes in any split read
        // as bytes whole; the reader never traps, never reads after an end,
        // text is valid UTF-8, and each message frames again to itself.
        // The first byte picks the role and where the rest is split.
        let role: WebSocketReader.Role = (data.first ?? 0) & 1 == 0 ? .client : .server
        let bytes = Array(data.dropFirst())
        let cut = data.isEmpty ? 0 : Int(data[data.startIndex] >> 1) % (bytes.count + 1)
        var whole = WebSocketReader(role: role, maximumMessageSize: 1 << 16)
        let once = bytes.withUnsafeBytes { whole.read($0) }
        var split = WebSocketReader(role: role, maximumMessageSize: 1 << 16)
        var pieces: [WebSocketReader.Event] = []
        for piece in [bytes[..<cut], bytes[cut...]] { pieces += piece.withUnsafeBytes { split.read($0) } }
        invariant(once == pieces, "a split changes nothing")
        for (index, event) in once.enumerated() {
            switch event {
            case .close, .failed: invariant(index == once.count - 1, "nothing after an end")
            case .text(let text):
                var again = WebSocketReader(role: .client, maximumMessageSize: 1 << 16)
                let frame = Array(text.utf8).withUnsafeBytes { WebSocketFrame.encode(.text, payload: $0, mask: nil) }
                invariant(frame.withUnsafeBytes { again.read($0) } == [event], "a text message frames again to itself")
            case .binary(let payload):
                invariant(payload.count <= 1 << 16, "a message within the maximum")
            default: break
            }
        }
    },
    FuzzTarget(name: "http1-response") { data in
        // An HTTP/1.1 answer on a connection of the session's own:
        // bytes in any split read the same, nothing follows an end, and a
        // step dropped (taken on a copy) leaves the reader as it was.
        // The first byte says where the rest is split and whether it ends.
        let bytes = Array(data.dropFirst())
        let cut = data.isEmpty ? 0 : Int(data[data.startIndex] >> 1) % (bytes.count + 1)
        let closes = (data.first ?? 0) & 1 == 1
        func run(_ pieces: [ArraySlice<UInt8>]) -> [String] {
            var reader = HTTP1ResponseReader(method: "GET", maximumHeadBytes: 4096)
            var steps: [String] = []
            var body: [UInt8] = []
            var rest = pieces[...]
            var endSent = false
            while steps.count < 100_000 {
                var trial = reader
                let step = trial.next()
                var copy = reader
                invariant(copy.next() == step, "a step is the same on a copy")
                reader = trial
                switch step {
                case .needMore:
                    if let piece = rest.popFirst() {
                        reader.append(piece)
                    } else if closes && !endSent {
                        reader.appendEnd()
                        endSent = true
                    } else {
                        return steps + ["more", "body \(body.count)"]
                    }
                case .body(let chunk):
                    invariant(!chunk.isEmpty, "a body step has bytes")
                    body += chunk
                case .interim(let head): steps.append("interim \(head.status)")
                case .head(let head): steps.append("head \(head.status)")
                case .end:
                    invariant(reader.next() == .end, "the end stays the end")
                    return steps + ["end", "body \(body.count)"]
                case .failed:
                    return steps + ["failed", "body \(body.count)"]
                }
            }
            invariant(false, "the reader ends")
            return steps
        }
        let whole = run([bytes[...]])
        let split = run([bytes[..<cut], bytes[cut...]])
        invariant(whole == split, "a split changes nothing: \(whole) \(split)")
    },
    FuzzTarget(name: "stored-blob") { data in
        if let fields = FieldCoding.decodeFields(data) {
            invariant(FieldCoding.decodeFields(FieldCoding.encode(fields)) == fields, "encode(decode(x)) decodes to the same fields")
        }
        if let dictionary = FieldCoding.decodeDictionary(data) {
            invariant(FieldCoding.decodeDictionary(FieldCoding.encode(dictionary)) == dictionary, "dictionary round trip")
        }
        // A userInfo column: the library's encoding (after its first line) or the older string pairs.
        for blob in [data, Data("URLLoading userInfo 1\n".utf8) + data] {
            let userInfo = CacheUserInfo(stored: blob)
            let again = CacheUserInfo(userInfo.dictionary)
            invariant(again != nil, "a userInfo read from a store can be stored again")
            invariant(again?.keys == userInfo.keys, "with the same keys")
        }
    },
]

let selected: FuzzTarget? = {
    let name = ProcessInfo.processInfo.environment["URLLOADING_FUZZ_TARGET"] ?? ""
    return targets.first { $0.name == name }
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    guard let target = selected else {
        FileHandle.standardError.write(Data("set URLLOADING_FUZZ_TARGET to one of: \(targets.map(\.name).joined(separator: " "))\n".utf8))
        exit(2)
    }
    target.run(Data(bytes: bytes, count: count))
    return 0
}
