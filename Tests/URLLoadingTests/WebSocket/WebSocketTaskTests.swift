import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import Streams
import TestSupport
@testable import URLLoading

/// WebSocket tasks against an independent server
/// (Debian's python3-websockets) and hand-made frames that break the protocol.
@Suite(.serialized, .timeLimit(.minutes(Sanitizer.minutes(3))))
struct WebSocketTaskTests {
    final class Events: SessionWebSocketDelegate, Sendable {
        let seen = Lock<[String]>([])
        func urlSession(_ session: Session, webSocketTask: SessionWebSocketTask, didOpenWithProtocol protocol: String?) {
            seen.withLock { $0.append("open \(`protocol` ?? "none")") }
        }
        func urlSession(_ session: Session, webSocketTask: SessionWebSocketTask, didCloseWith closeCode: SessionWebSocketTask.CloseCode, reason: Data?) {
            seen.withLock { $0.append("close \(closeCode.rawValue) \(reason.map { String(decoding: $0, as: UTF8.self) } ?? "-")") }
        }
    }

    /// The server, or nil (said once) where python3-websockets is missing.
    static func server() async throws -> TestWebSocketServer? {
        guard TestWebSocketServer.isAvailable else {
            print("WebSocket tests: /usr/bin/python3 with websockets is not installed (tools/install-deps installs python3-websockets)")
            return nil
        }
        return try await TestWebSocketServer.start()
    }

    @Test("Handshake values: RFC 6455's example accept, the request's fields, and every way an answer is refused")
    func handshake() {
        #expect(WebSocketHandshake.accept(for: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        let url = URL(string: "ws://example.com:8080/chat?room=1")!
        let request = String(
            decoding: WebSocketHandshake.request(
                url: url, key: "k", protocols: ["chat", "superchat"], fields: [("X-Test", "1"), ("Upgrade", "h2c"), ("Bad\r\nName", "x"), ("Y", "a\r\nb")]),
            as: UTF8.self)
        #expect(request.hasPrefix("GET /chat?room=1 HTTP/1.1\r\nHost: example.com:8080\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"))
        #expect(request.contains("Sec-WebSocket-Protocol: chat, superchat\r\n") && request.contains("X-Test: 1\r\n"))
        #expect(!request.contains("h2c") && !request.contains("Bad") && !request.contains("a\r\nb"), "fields the handshake owns or that break lines are not sent")
        let key = "dGhlIHNhbXBsZSBub25jZQ=="
        func answer(_ lines: [String]) -> [UInt8] { Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8) }
        let good = ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="]
        let plain = try? WebSocketHandshake.check(head: answer(good), key: key, protocols: []).get()
        #expect(plain != nil && plain?.selectedProtocol == nil)
        #expect((try? WebSocketHandshake.check(head: answer(good + ["Sec-WebSocket-Protocol: chat"]), key: key, protocols: ["chat"]).get())?.selectedProtocol == "chat")
        let refused: [[String]] = [
            ["HTTP/1.1 200 OK"], ["HTTP/1.1 101 Switching Protocols", "Connection: Upgrade", "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="],
            ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="],
            ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: AAAA"],
            good + ["Sec-WebSocket-Protocol: other"], good + ["Sec-WebSocket-Extensions: permessage-deflate"], ["garbage"],
        ]
        for lines in refused {
            if case .success = WebSocketHandshake.check(head: answer(lines), key: key, protocols: ["chat"]) { Issue.record("accepted: \(lines)") }
        }
    }

    @Test("Echo of text, binary, 16 MiB and empty messages; the chosen subprotocol and a header field reach the server; the delegate hears the open")
    func echo() async throws {
        guard let server = try await Self.server() else { return }
        let events = Events()
        let session = Session(configuration: .ephemeral, delegate: events)
        var request = URLRequest(url: URL(string: "ws://127.0.0.1:\(server.port)/hello")!)
        request.setValue("superchat", forHTTPHeaderField: "Sec-WebSocket-Protocol")
        request.setValue("from the test", forHTTPHeaderField: "X-Test")
        let task = session.webSocketTask(with: request)
        task.maximumMessageSize = 32 << 20
        task.resume()
        #expect(try await task.receive() == .string("superchat"))
        #expect(try await task.receive() == .string("from the test"))
        #expect(events.seen.withLock { $0 } == ["open superchat"])
        let big = Data(TestOrigin.pattern(offset: 3, count: 16 << 20))
        let messages: [SessionWebSocketTask.Message] = [.string("héllo ✓"), .data(Data([0, 1, 2, 255])), .string(""), .data(big), .string("after")]
        for message in messages { try await task.send(message) }
        for message in messages { #expect(try await task.receive() == message) }
        task.cancel(with: .normalClosure, reason: Data("done".utf8))
        #expect(await eventually { task.state == SessionTask.State.completed })
        #expect(task.closeCode == SessionWebSocketTask.CloseCode.normalClosure && task.error == nil)
        // The delegate hears the close on the task's context, after the state changed.
        #expect(await eventually { events.seen.withLock { $0 }.last?.hasPrefix("close 1000 ") == true }, "\(events.seen.withLock { $0 })")
        await server.shutdown()
    }

    @Test("Pings both ways: the server's pong answers ours; ours answers the server's")
    func pings() async throws {
        guard let server = try await Self.server() else { return }
        let session = Session(configuration: .ephemeral)
        let task = session.webSocketTask(with: URL(string: "ws://127.0.0.1:\(server.port)/ping")!)
        task.resume()
        #expect(try await task.receive() == .string("pong-received"))
        let pong = Lock<String?>(nil)
        task.sendPing { error in pong.withLock { $0 = error.map { "\($0)" } ?? "pong" } }
        #expect(await eventually { pong.withLock { $0 } != nil })
        #expect(pong.withLock { $0 } == "pong")
        task.cancel(with: .goingAway, reason: nil)
        await server.shutdown()
    }

    @Test("The server closes with each code: the task reads it, answers it, and later receives fail")
    func serverCloses() async throws {
        guard let server = try await Self.server() else { return }
        for code in [1000, 1001, 1003, 1008, 1011, 4000] {
            let events = Events()
            let session = Session(configuration: .ephemeral, delegate: events)
            let task = session.webSocketTask(with: URL(string: "ws://127.0.0.1:\(server.port)/close/\(code)")!)
            task.resume()
            await #expect(throws: URLError.self) { _ = try await task.receive() }
            #expect(await eventually { task.state == SessionTask.State.completed })
            #expect(task.closeCodeValue == code, "\(code)")
            #expect(task.closeReason == Data("bye".utf8))
            let named = SessionWebSocketTask.CloseCode(rawValue: code)?.rawValue ?? 0
            #expect(await eventually { events.seen.withLock { $0 }.last?.hasPrefix("close \(named) bye") == true }, "\(events.seen.withLock { $0 })")
        }
        await server.shutdown()
    }

    @Test("A server breaking the protocol gets the close code the RFC names: a masked frame 1002, invalid UTF-8 1007, a 126-byte ping 1002")
    func violations() async throws {
        guard let server = try await Self.server() else { return }
        let session = Session(configuration: .ephemeral)
        for (path, code) in [("/masked", 1002), ("/bad-utf8", 1007), ("/big-control", 1002)] {
            let task = session.webSocketTask(with: URL(string: "ws://127.0.0.1:\(server.rawPort)\(path)")!)
            task.resume()
            await #expect(throws: URLError.self) { _ = try await task.receive() }
            #expect(task.closeCodeValue == code, "\(path)")
            #expect(await eventually { server.closes.contains("\(path) \(code) opcode 8") }, "\(path): \(server.closes)")
        }
        for path in ["/bad-accept", "/no-upgrade"] {
            let task = session.webSocketTask(with: URL(string: "ws://127.0.0.1:\(server.rawPort)\(path)")!)
            task.resume()
            await #expect(throws: URLError.self) { _ = try await task.receive() }
            #expect((task.error as? URLError)?.code == .badServerResponse, "\(path): \(String(describing: task.error))")
        }
        await server.shutdown()
    }

    @Test("A message over maximumMessageSize closes with 1009; nothing listening fails the task; a non-ws URL is refused")
    func limitsAndFailures() async throws {
        guard let server = try await Self.server() else { return }
        let session = Session(configuration: .ephemeral)
        let task = session.webSocketTask(with: URL(string: "ws://127.0.0.1:\(server.port)/echo")!)
        task.maximumMessageSize = 1000
        task.resume()
        try await task.send(.data(Data(count: 1001)))
        await #expect(throws: URLError.self) { _ = try await task.receive() }
        #expect(task.closeCode == SessionWebSocketTask.CloseCode.messageTooBig)

        let unsupported = session.webSocketTask(with: URL(string: "ftp://127.0.0.1/")!)
        #expect((unsupported.error as? URLError)?.code == .unsupportedURL)
        await server.shutdown()
        // Bound, not listening: refused, and no parallel test's server can take it.
        let closed = try ReservedPort()
        defer { closed.release() }
        let refused = session.webSocketTask(with: URL(string: "ws://127.0.0.1:\(closed.port)/echo")!)
        refused.resume()
        await #expect(throws: URLError.self) { _ = try await refused.receive() }
        #expect((refused.error as? URLError)?.code == .cannotConnectToHost)
    }

    @Test("permessage-deflate: offered, agreed with the server, every message compressed both ways with the window kept; big and repeated messages echo whole")
    func deflate() async throws {
        guard let server = try await Self.server() else { return }
        let session = Session(configuration: .ephemeral)
        let task = session.webSocketTask(with: URL(string: "ws://127.0.0.1:\(server.deflatePort)/extensions")!)
        task.maximumMessageSize = 32 << 20
        task.resume()
        #expect(try await task.receive() == .string("permessage-deflate"))
        let text = String(repeating: "the same words again and again, ", count: 40_000)
        var messages: [SessionWebSocketTask.Message] = (0..<40).map { .string("message \($0) \(text.prefix($0 * 50))") }
        messages += [.string(text), .data(Data(TestOrigin.pattern(offset: 9, count: 5 << 20))), .data(Data()), .string("é✓")]
        do {
            for message in messages { try await task.send(message) }
            for message in messages { #expect(try await task.receive() == message) }
        } catch {
            Issue.record("closed with \(task.closeCodeValue.map { "\($0)" } ?? "no code"): \(error)")
        }
        task.cancel(with: .normalClosure, reason: nil)
        #expect(await eventually { task.state == SessionTask.State.completed })
        await server.shutdown()
    }

    @Test("permessage-deflate's answer: parameters read, anything else refused; a compression bomb stops at the limit")
    func deflateParameters() throws {
        #expect(DeflateParameters("permessage-deflate") == DeflateParameters(serverNoContextTakeover: false, clientNoContextTakeover: false, serverMaxWindowBits: 15, clientMaxWindowBits: 15))
        #expect(
            DeflateParameters("permessage-deflate; server_no_context_takeover; client_max_window_bits=\"10\"; server_max_window_bits=9")
                == DeflateParameters(serverNoContextTakeover: true, clientNoContextTakeover: false, serverMaxWindowBits: 9, clientMaxWindowBits: 10))
        for refused in [
            "x-webkit-deflate-frame", "permessage-deflate, permessage-deflate", "permessage-deflate; client_max_window_bits=16",
            "permessage-deflate; server_no_context_takeover; server_no_context_takeover", "permessage-deflate; unknown", "permessage-deflate; ;",
            "permessage-deflate; server_no_context_takeover=1", "permessage-deflate; client_max_window_bits=99999999999999999999",
        ] {
            #expect(DeflateParameters(refused) == nil, "\(refused)")
        }
        let compressor = try #require(MessageDeflate(inflating: false, windowBits: 15))
        let decompressor = try #require(MessageDeflate(inflating: true, windowBits: 15))
        let zeros = Data(count: 8 << 20)
        let squeezed = compressor.compress(zeros)
        #expect(squeezed.count < 20_000)
        #expect(decompressor.decompress(squeezed, limit: 1 << 20) == .failure(.tooBig))
        let again = try #require(MessageDeflate(inflating: true, windowBits: 15))
        #expect(again.decompress(squeezed, limit: 8 << 20) == .success(zeros))
        #expect(try #require(MessageDeflate(inflating: true, windowBits: 15)).decompress(Data([0xFF, 0xFF, 0xFF]), limit: 100) == .failure(.corrupt))
        // An empty message after another compresses to one byte that inflates to nothing.
        let sender = try #require(MessageDeflate(inflating: false, windowBits: 15))
        let receiver = try #require(MessageDeflate(inflating: true, windowBits: 15))
        #expect(receiver.decompress(sender.compress(Data("first".utf8)), limit: 100) == .success(Data("first".utf8)))
        let empty = sender.compress(Data())
        #expect(empty == Data([0x00]))
        #expect(receiver.decompress(empty, limit: 100) == .success(Data()))
    }

    @Test("Cookies: the session's cookies for the http URL go with the handshake, the answer's Set-Cookie is kept; a request's own Cookie field wins")
    func cookies() async throws {
        guard let server = try await Self.server() else { return }
        let configuration = SessionConfiguration.ephemeral
        let session = Session(configuration: configuration)
        let store = try #require(session.cookieStore)
        let site = URL(string: "http://127.0.0.1:\(server.port)/")!
        _ = store.setCookies(["sid=abc; Path=/"], for: site)
        let task = session.webSocketTask(with: URL(string: "ws://127.0.0.1:\(server.port)/cookie")!)
        task.resume()
        #expect(try await task.receive() == .string("sid=abc"))
        #expect(store.cookies(for: site)?.contains { $0.name == "from" && $0.value == "server" } == true)
        task.cancel(with: .normalClosure, reason: nil)

        var request = URLRequest(url: URL(string: "ws://127.0.0.1:\(server.port)/cookie")!)
        request.setValue("mine=1", forHTTPHeaderField: "Cookie")
        let own = session.webSocketTask(with: request)
        own.resume()
        #expect(try await own.receive() == .string("mine=1"))
        own.cancel(with: .normalClosure, reason: nil)
        await server.shutdown()
    }

    @Test("Credentials: a 401 to the handshake is answered once with the session's credential for the realm; none, or a wrong one, fails userAuthenticationRequired")
    func credentials() async throws {
        guard let server = try await Self.server() else { return }
        let url = try #require(URL(string: "ws://127.0.0.1:\(server.port)/auth"))
        let site = try #require(URL(string: "http://127.0.0.1:\(server.port)/"))
        let space = try #require(ProtectionSpace(url: site, realm: "sockets", authenticationMethod: .httpBasic))
        for (user, password, opens) in [("ws-user", "ws-secret", true), ("ws-user", "wrong", false), ("", "", false)] {
            let configuration = SessionConfiguration.ephemeral
            let store = CredentialStore()
            if !user.isEmpty { store.setDefaultCredential(Credential(user: user, password: password, persistence: .forSession), for: space) }
            configuration.urlCredentialStorage = store
            let session = Session(configuration: configuration)
            let task = session.webSocketTask(with: url)
            task.resume()
            if opens {
                #expect(try await task.receive() == .string("authorized"))
                try await task.send(.string("after auth"))
                #expect(try await task.receive() == .string("after auth"))
                task.cancel(with: .normalClosure, reason: nil)
            } else {
                let error = await #expect(throws: URLError.self) { _ = try await task.receive() }
                #expect(error?.code == .userAuthenticationRequired, "\(user) \(password)")
                #expect(error.map { "\($0)" }?.contains(password.isEmpty ? "no credential" : "refused") == true)
            }
        }
        await server.shutdown()
    }
}
