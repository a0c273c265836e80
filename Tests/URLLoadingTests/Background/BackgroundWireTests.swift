import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
import TestSupport
@testable import URLLoading

/// The frames between a background session and transferd,
/// without a socket: versioned, length-prefixed, every number checked.
@Suite struct BackgroundWireTests {
    static let request = RequestSpec(url: "https://example.com/file", method: "GET", headers: [["Accept", "*/*"]], timeout: 60)
    static let spec = TaskSpec(task: 3, kind: .download, request: request, bodyFile: nil, earliestBeginDate: nil, isDiscretionary: false, taskDescription: nil)

    static func frame(_ message: BackgroundMessage) throws -> Data { try BackgroundFraming.encode(message) }

    /// A frame around a raw JSON body, as a hostile peer could send it.
    static func rawFrame(_ json: String, version: UInt8 = BackgroundFraming.version) -> Data {
        let body = Array(json.utf8)
        let length = UInt32(body.count)
        return Data([0x55, version, UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + body)
    }

    @Test("Messages survive a frame fed one byte at a time, several per read")
    func roundTrip() throws {
        let messages: [BackgroundMessage] = [
            .attach(Attachment(identifier: "com.example.sync", processID: 42, launchCommand: ["/usr/bin/app", "--sync"])),
            .create(Self.spec), .resume(task: 3), .progress(task: 3, sent: 0, written: 1 << 40, expectedToSend: 0, expectedToWrite: -1),
            .finished(TaskResult(task: 3, file: "/tmp/x", response: nil, body: nil, errorCode: nil, errorMessage: nil, sent: 0, written: 10)),
            .eventsDone,
            .challenge(
                task: 3,
                challenge: BackgroundChallenge(
                    AuthenticationChallenge(
                        protectionSpace: ProtectionSpace(host: "example.com", port: 443, protocol: "https", realm: "vault", authenticationMethod: .httpBasic),
                        proposedCredential: nil, previousFailureCount: 1, failureResponse: nil, serverChallenge: nil))),
            .answerChallenge(task: 3, answer: BackgroundChallengeAnswer(.useCredential, Credential(user: "alice", password: "s3cret", persistence: .permanent))),
        ]
        var bytes = Data()
        for message in messages { bytes.append(try Self.frame(message)) }
        #expect(bytes.prefix(2) == Data([0x55, 1]), "a mark and the version lead every frame")
        var framing = BackgroundFraming()
        var received: [BackgroundMessage] = []
        for byte in bytes {
            framing.append(Data([byte]))
            while let message = try framing.next() { received.append(message) }
        }
        #expect(received == messages)
    }

    /// Every kind of message, the ones with a compact form of their own filled in every field.
    static var everyKind: [BackgroundMessage] {
        var full = spec
        full.kind = .upload
        full.request.headers = [["Accept", "*/*"], ["X-Empty", ""], ["X-Ünïcode", "välue ✓"]]
        full.request.timeout = 12.5
        full.bodyFile = "/tmp/body"
        full.bodyPassed = true
        full.earliestBeginDate = Date(timeIntervalSinceReferenceDate: 812_345_678.25)
        full.isDiscretionary = true
        full.taskDescription = "nightly sync"
        full.proxies = ProxyRules(http: "http://proxy.example:3128", exceptions: [.name("local")])
        full.trustRootsFile = "/etc/roots.pem"
        full.resumableUploadVersion = 6
        full.tlsMinimumVersion = [1, 2]
        full.tlsMaximumVersion = [1, 3]
        full.resumed = true
        let response = ResponseSpec(
            url: "https://example.com/file", status: 206, httpVersion: "HTTP/2", headers: [["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"]], reasonPhrase: "Partial")
        return [
            .create(spec), .create(full), .resume(task: 1), .suspend(task: Int(Int32.max)), .cancel(task: 7), .acknowledge(task: 3),
            .progress(task: 3, sent: 0, written: 1 << 40, expectedToSend: -1, expectedToWrite: Int64(FieldNumber.maximumLength)),
            .finished(TaskResult(task: 3, file: "/tmp/x", response: response, body: Data([0, 1, 255]), errorCode: "timedOut", errorMessage: "late", sent: 5, written: 10, expectedToWrite: -1)),
            .finished(TaskResult(task: 4, file: nil, response: nil, body: nil, errorCode: nil, errorMessage: nil, sent: 0, written: 0)),
            .eventsDone, .attach(Attachment(identifier: "com.example.sync", processID: 42, launchCommand: ["/usr/bin/app"])),
            .attached(nextTask: 4, tasks: [TaskSummary(spec: spec, finished: false, sent: 0, written: 10, expectedToWrite: 20)], pending: 0, revision: 3),
            .answerBegin(task: 3, proceed: true, request: request), .refused(reason: "taken"), .askBegin(task: 3),
            .cancelTransfer(session: "s", task: 3), .retryTransfer(session: "s", task: 3), .done(ok: true, message: "ok"),
        ]
    }

    @Test("Compact frames: every kind of message reads as itself, in pieces; a task's messages are smaller than their JSON")
    func compact() throws {
        var bytes = Data()
        for message in Self.everyKind { bytes.append(try BackgroundFraming.encode(message, compact: true)) }
        #expect(bytes.prefix(2) == Data([0x55, BackgroundFraming.compactVersion]))
        var framing = BackgroundFraming()
        var received: [BackgroundMessage] = []
        for chunk in stride(from: 0, to: bytes.count, by: 7) {
            framing.append(bytes[chunk..<min(chunk + 7, bytes.count)])
            while let message = try framing.next() { received.append(message) }
        }
        #expect(received == Self.everyKind)
        for message in Self.everyKind.prefix(9) {
            #expect(try BackgroundFraming.encode(message, compact: true).count < BackgroundFraming.encode(message).count, "\(message)")
        }
    }

    @Test("A compact body cut short, with bytes after its end, an unknown kind, a number over 64 bits, a length past its end or text that is not UTF-8 is refused")
    func compactHostile() throws {
        func read(_ body: [UInt8]) throws(BackgroundWireError) -> BackgroundMessage? {
            var framing = BackgroundFraming()
            let length = UInt32(body.count)
            framing.append(Data([0x55, BackgroundFraming.compactVersion, UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + body))
            return try framing.next()
        }
        for message in Self.everyKind.prefix(9) {
            let body = Array(try BackgroundFraming.encode(message, compact: true).dropFirst(BackgroundFraming.headerLength))
            #expect(try read(body) == message)
            for cut in 0..<body.count {
                #expect(throws: BackgroundWireError.self, "\(message) cut at \(cut)") { try read(Array(body.prefix(cut))) }
            }
            #expect(throws: BackgroundWireError.self) { try read(body + [0]) }
        }
        #expect(throws: BackgroundWireError.self) { try read([200, 1]) }
        // resume(task:) with an 11-byte number, and with a number of 65 bits.
        #expect(throws: BackgroundWireError.self) { try read([2] + [UInt8](repeating: 0xFF, count: 10) + [1]) }
        #expect(throws: BackgroundWireError.self) { try read([2] + [UInt8](repeating: 0xFF, count: 9) + [2]) }
        // A task identifier out of bounds is refused as in JSON.
        #expect(throws: BackgroundWireError.self) { try read([2, 0]) }
        // finished: a file name announcing 100 bytes with 2 left, and one that is not UTF-8.
        #expect(throws: BackgroundWireError.self) { try read([7, 6, 1, 200, 1, 0x41, 0x42]) }
        #expect(throws: BackgroundWireError.self) { try read([7, 6, 1, 4, 0xC3, 0x28, 0, 0, 0, 0, 0, 0, 0, 0]) }
    }

    @Test("Revisions: an older peer's messages (no revision, no resumed, no expected length) still read; a revision out of bounds is refused")
    func revisions() throws {
        var framing = BackgroundFraming()
        framing.append(Self.rawFrame(#"{"attached":{"nextTask":4,"tasks":[],"pending":0}}"#))
        framing.append(Self.rawFrame(#"{"attach":{"_0":{"identifier":"com.example.sync","processID":42}}}"#))
        framing.append(Self.rawFrame(#"{"finished":{"_0":{"task":3,"sent":0,"written":10}}}"#))
        #expect(try framing.next() == .attached(nextTask: 4, tasks: [], pending: 0, revision: nil))
        #expect(try framing.next() == .attach(Attachment(identifier: "com.example.sync", processID: 42, launchCommand: nil, revision: nil)))
        let result = TaskResult(task: 3, file: nil, response: nil, body: nil, errorCode: nil, errorMessage: nil, sent: 0, written: 10)
        #expect(try framing.next() == .finished(result))
        #expect(Attachment(identifier: "a", processID: 1, launchCommand: nil).revision == BackgroundMessage.revision)
        var resumed = Self.spec
        resumed.resumed = true
        var current = BackgroundFraming()
        current.append(try Self.frame(.create(resumed)))
        current.append(try Self.frame(.attached(nextTask: 1, tasks: [], pending: 0, revision: BackgroundMessage.revision)))
        #expect(try current.next() == .create(resumed))
        #expect(try current.next() == .attached(nextTask: 1, tasks: [], pending: 0, revision: 3))
        var bad = BackgroundFraming()
        bad.append(Self.rawFrame(#"{"attached":{"nextTask":4,"tasks":[],"pending":0,"revision":0}}"#))
        #expect(throws: BackgroundWireError.self) { try bad.next() }
        bad = BackgroundFraming()
        bad.append(Self.rawFrame(#"{"finished":{"_0":{"task":3,"sent":0,"written":10,"expectedToWrite":-7}}}"#))
        #expect(throws: BackgroundWireError.self) { try bad.next() }
    }

    @Test("Another version, another kind of peer, a huge length: refused at the header, before the body arrives")
    func headers() throws {
        var other = BackgroundFraming()
        other.append(Self.rawFrame("{}", version: 9).prefix(2))
        #expect(throws: BackgroundWireError.self) { try other.next() }
        var http = BackgroundFraming()
        http.append(Data("GET / HTTP/1.1\r\n".utf8))
        #expect(throws: BackgroundWireError.self) { try http.next() }
        var huge = BackgroundFraming()
        huge.append(Data([0x55, 1, 0xFF, 0xFF, 0xFF, 0xFF]))
        #expect(throws: BackgroundWireError.self) { try huge.next() }
        var partial = BackgroundFraming()
        partial.append(Data([0x55, 1, 0, 0]))
        #expect(try partial.next() == nil, "a header in pieces waits for the rest")
    }

    @Test("Numbers and sizes out of bounds close the connection: task ids, byte counts, identifiers, header fields, URLs")
    func bounds() throws {
        let bad = [
            #"{"resume":{"task":0}}"#,
            #"{"cancel":{"task":-5}}"#,
            #"{"acknowledge":{"task":9223372036854775807}}"#,
            #"{"resume":{"task":1e400}}"#,
            #"{"progress":{"task":1,"sent":-2,"written":0,"expectedToSend":0,"expectedToWrite":0}}"#,
            #"{"attach":{"_0":{"identifier":"","processID":1}}}"#,
            #"{"attach":{"_0":{"identifier":"a\u0000b","processID":1}}}"#,
            #"{"attach":{"_0":{"identifier":"a","processID":-1}}}"#,
            #"{"create":{"_0":{"task":1,"kind":"download","request":{"url":"file:///etc/passwd","method":"GET","headers":[],"timeout":1},"isDiscretionary":false}}}"#,
            #"{"create":{"_0":{"task":1,"kind":"download","request":{"url":"http://a/","method":"GET","headers":[["X","a\r\nInjected: 1"]],"timeout":1},"isDiscretionary":false}}}"#,
            #"{"create":{"_0":{"task":1,"kind":"download","request":{"url":"http://a/","method":"GET","headers":[["X"]],"timeout":1},"isDiscretionary":false}}}"#,
            #"{"create":{"_0":{"task":1,"kind":"upload","request":{"url":"http://a/","method":"PUT","headers":[],"timeout":1},"bodyFile":"relative","isDiscretionary":false}}}"#,
            #"{"create":{"_0":{"task":1,"kind":"download","request":{"url":"http://a/","method":"G E T","headers":[],"timeout":1},"isDiscretionary":false}}}"#,
            #"{"challenge":{"task":1,"challenge":{"host":"a b","port":80,"protocolName":"http","method":"basic","isProxy":false,"previousFailureCount":0}}}"#,
            #"{"challenge":{"task":1,"challenge":{"host":"a","port":70000,"protocolName":"http","method":"basic","isProxy":false,"previousFailureCount":0}}}"#,
            #"{"challenge":{"task":1,"challenge":{"host":"a","port":80,"protocolName":"ftp","method":"basic","isProxy":false,"previousFailureCount":0}}}"#,
            #"{"challenge":{"task":1,"challenge":{"host":"a","port":80,"protocolName":"http","method":"basic","isProxy":false,"previousFailureCount":-1}}}"#,
            #"{"answerChallenge":{"task":1,"answer":{"disposition":"useCredential","user":"a","password":"p","persistence":"forever"}}}"#,
            #"{"answerChallenge":{"task":1,"answer":{"disposition":"trustMe"}}}"#,
            #"{"attach":{"_0":{"identifier":"a","processID":1,"credentialStore":"relative/folder"}}}"#,
            #"{"noSuchMessage":{}}"#,
            #"not json"#,
        ]
        for json in bad {
            var framing = BackgroundFraming()
            framing.append(Self.rawFrame(json))
            #expect(throws: BackgroundWireError.self, "\(json)") { try framing.next() }
        }
        // The same shapes within bounds are read.
        var good = BackgroundFraming()
        good.append(Self.rawFrame(#"{"resume":{"task":2147483647}}"#))
        #expect(try good.next() == .resume(task: Int(Int32.max)))
    }

    @Test("A challenge's answer crosses with its password, which no description shows; it maps back to the delegate's disposition")
    func challengeAnswers() {
        let answer = BackgroundChallengeAnswer(.useCredential, Credential(user: "alice", password: "s3cret", persistence: .permanent))
        let message = BackgroundMessage.answerChallenge(task: 1, answer: answer)
        #expect(!"\(message)".contains("s3cret") && !"\(answer)".contains("s3cret") && "\(answer)".contains("alice"))
        let (disposition, credential) = answer.answer
        #expect(disposition == .useCredential && credential?.user == "alice" && credential?.password == "s3cret")
        #expect(credential?.persistence == Credential.Persistence.none, "transferd keeps an app's credential for that request only")
        #expect(BackgroundChallengeAnswer(.rejectProtectionSpace, nil).answer.0 == .rejectProtectionSpace)
        #expect(BackgroundChallengeAnswer(.cancelAuthenticationChallenge, nil).answer.1 == nil)
    }

    @Test("An upload's body descriptor crosses with its frame, readable after the file is deleted; unclaimed descriptors are bounded")
    func passedDescriptor() throws {
        var ends: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
        let app = UnixSocket(descriptor: ends[0])
        let daemon = UnixSocket(descriptor: ends[1])
        let directory = TemporaryDirectory("wire")
        let path = directory.path("body")
        try Data("the whole body".utf8).write(to: URL(fileURLWithPath: path))
        let body = open(path, O_RDONLY | O_CLOEXEC)
        try #require(body >= 0)
        var spec = Self.spec
        spec.kind = .upload
        spec.bodyFile = path
        spec.bodyPassed = true
        try app.send(.resume(task: 1))
        try app.send(.create(spec), passing: body)
        close(body)
        unlink(path)
        var framing = BackgroundFraming()
        #expect(try daemon.receive(&framing) == .resume(task: 1))
        #expect(try daemon.receive(&framing) == .create(spec))
        let claimed = framing.takeDescriptor()
        let received = try #require(claimed)
        defer { close(received) }
        var bytes = [UInt8](repeating: 0, count: 64)
        let count = pread(received, &bytes, bytes.count, 0)
        #expect(count == 14 && String(decoding: bytes.prefix(max(0, count)), as: UTF8.self) == "the whole body")
        let another = framing.takeDescriptor()
        #expect(another == nil, "one descriptor, one claim")

        // A peer passing descriptors no message claims is cut off past the bound.
        let spare = open("/dev/null", O_RDONLY | O_CLOEXEC)
        try #require(spare >= 0)
        defer { close(spare) }
        for _ in 0..<BackgroundFraming.maximumDescriptors {
            try app.send(.resume(task: 1), passing: spare)
            #expect(try daemon.receive(&framing) == .resume(task: 1))
        }
        #expect(throws: BackgroundWireError.self) {
            try app.send(.resume(task: 1), passing: spare)
            _ = try daemon.receive(&framing)
        }
        let left = framing.takeDescriptor()
        #expect(left == nil, "the unclaimed ones were closed")
    }
}
