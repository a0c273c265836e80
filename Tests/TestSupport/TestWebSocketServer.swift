import Foundation

/// An independent WebSocket server for the tests: Debian's
/// `python3-websockets` (RFC 6455) run as a child process in its own
/// process group, its output in a log file, ended by `shutdown()`. A second
/// port serves hand-made frames that break the protocol.
///
/// Paths on `port`: `/echo` echoes every message (text as text); `/hello`
/// first sends the chosen subprotocol (or "none") and the request's
/// `X-Test` field, then echoes; `/cookie` first sends the request's
/// `Cookie` field (every answer on `port` sets `from=server`); `/auth`
/// answers 401 (Basic, realm "sockets") unless the handshake carries
/// `ws-user:ws-secret`, then says "authorized" and echoes;
/// `/close/<code>` closes with that code and
/// the reason "bye"; `/ping` pings the client and says "pong-received".
/// Paths on `rawPort`: `/masked` (a masked frame), `/bad-utf8`,
/// `/big-control` (a 126-byte ping), `/bad-accept`, `/no-upgrade`; on
/// `deflatePort`, the same paths as `port` with permessage-deflate, and
/// `/extensions` first says which extensions were agreed; the
/// close code the client sends back is appended to `closesFile`.
public final class TestWebSocketServer: Sendable {
    public let port: Int
    public let rawPort: Int
    /// The same paths as `port`, with permessage-deflate accepted.
    public let deflatePort: Int
    /// "<path> <code>" per close frame the raw server read.
    public let closesFile: String
    /// The server's log (its standard output and error).
    public let logFile: String
    private let process: ChildProcess.Running
    private let directory: URL

    private init(port: Int, rawPort: Int, deflatePort: Int, closesFile: String, logFile: String, process: ChildProcess.Running, directory: URL) {
        self.port = port
        self.rawPort = rawPort
        self.deflatePort = deflatePort
        self.closesFile = closesFile
        self.logFile = logFile
        self.process = process
        self.directory = directory
    }

    /// Whether Debian's python3 with `websockets` is here.
    public static var isAvailable: Bool {
        guard let check = try? ChildProcess.start(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", "import websockets"]) else { return false }
        return check.waitBlocking().status == 0
    }

    /// Starts the server and waits (bounded) for its ports.
    public static func start() async throws -> TestWebSocketServer {
        // Removed by shutdown() (the process uses it until then).
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("websocket-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let script = directory.appendingPathComponent("server.py").path
        let ports = directory.appendingPathComponent("ports").path
        let closes = directory.appendingPathComponent("closes").path
        try Data(serverScript.utf8).write(to: URL(fileURLWithPath: script))
        let process = try ChildProcess.start(URL(fileURLWithPath: "/usr/bin/python3"), [script, ports, closes])
        let found = await eventually(within: .seconds(30)) {
            ((try? String(contentsOfFile: ports, encoding: .utf8)) ?? "").hasSuffix("\n")
        }
        let numbers = ((try? String(contentsOfFile: ports, encoding: .utf8)) ?? "").split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard found, numbers.count == 3 else {
            process.kill(SIGKILL)
            _ = try? await process.wait()
            try? FileManager.default.removeItem(at: directory)
            throw TestOriginError(message: "the WebSocket server did not start; its log: \(process.outputPath?.path ?? "none")")
        }
        return TestWebSocketServer(
            port: numbers[0], rawPort: numbers[1], deflatePort: numbers[2], closesFile: closes, logFile: process.outputPath?.path ?? "", process: process, directory: directory)
    }

    /// The close codes the raw server read, by path.
    public var closes: [String] {
        ((try? String(contentsOfFile: closesFile, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// Ends the server process (and waits for it). SIGKILL: the server keeps
    /// nothing, and a child of the test process may inherit blocked signals.
    public func shutdown() async {
        process.kill(SIGKILL)
        _ = try? await process.wait()
        try? FileManager.default.removeItem(at: directory)
    }

    static let serverScript = #"""
        import asyncio, base64, hashlib, http, os, signal, struct, sys
        import websockets

        # A process group of its own; the test process's blocked signals are not ours.
        try:
            os.setsid()
        except OSError:
            pass  # already the leader of its own group
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})

        ports_file, closes_file = sys.argv[1], sys.argv[2]
        GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

        async def handler(ws, path=None):
            path = ws.path
            if path.startswith("/close/"):
                await ws.close(code=int(path[7:]), reason="bye")
                return
            if path == "/cookie":
                await ws.send(ws.request_headers.get("Cookie", "none"))
            if path == "/extensions":
                await ws.send(",".join(e.name for e in ws.extensions) or "none")
            if path == "/auth":
                await ws.send("authorized")
            if path == "/hello":
                await ws.send(ws.subprotocol or "none")
                await ws.send(ws.request_headers.get("X-Test", "absent"))
            if path == "/ping":
                waiter = await ws.ping()
                await waiter
                await ws.send("pong-received")
            async for message in ws:
                await ws.send(message)

        def frame(opcode, payload, mask=None):
            head = bytes([0x80 | opcode])
            n = len(payload)
            bit = 0x80 if mask else 0
            if n < 126: head += bytes([bit | n])
            elif n < 65536: head += bytes([bit | 126]) + struct.pack("!H", n)
            else: head += bytes([bit | 127]) + struct.pack("!Q", n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
                head += mask
            return head + payload

        async def raw(reader, writer):
            try:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                path = lines[0].split(" ")[1]
                key = next(l.split(":", 1)[1].strip() for l in lines if l.lower().startswith("sec-websocket-key:"))
                accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
                if path == "/no-upgrade":
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno")
                    await writer.drain(); writer.close(); return
                if path == "/bad-accept":
                    accept = base64.b64encode(b"0" * 20).decode()
                writer.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                              "Sec-WebSocket-Accept: %s\r\n\r\n" % accept).encode())
                if path == "/masked": writer.write(frame(0x1, b"masked", mask=b"abcd"))
                elif path == "/bad-utf8": writer.write(frame(0x1, b"ok \xff\xfe"))
                elif path == "/big-control": writer.write(frame(0x9, b"x" * 126))
                await writer.drain()
                # The client's close frame (masked): its code.
                first = await asyncio.wait_for(reader.readexactly(2), 10)
                n = first[1] & 0x7F
                if n == 126: n = struct.unpack("!H", await reader.readexactly(2))[0]
                mask = await reader.readexactly(4)
                body = bytes(b ^ mask[i % 4] for i, b in enumerate(await reader.readexactly(n)))
                code = struct.unpack("!H", body[:2])[0] if len(body) >= 2 else 1005
                with open(closes_file, "a") as f: f.write("%s %d opcode %d\n" % (path, code, first[0] & 0x0F))
            except Exception as error:
                print("raw:", repr(error), flush=True)
            finally:
                writer.close()

        def check_auth(path, headers):
            # /auth wants Basic ws-user:ws-secret.
            if path == "/auth":
                expected = "Basic " + base64.b64encode(b"ws-user:ws-secret").decode()
                if headers.get("Authorization") != expected:
                    return (http.HTTPStatus.UNAUTHORIZED, [("WWW-Authenticate", 'Basic realm="sockets"')], b"who are you?\n")
            return None

        async def main():
            server = await websockets.serve(handler, "127.0.0.1", 0, subprotocols=["chat", "superchat"], max_size=None,
                                            compression=None, ping_interval=None, process_request=check_auth,
                                            extra_headers=[("Set-Cookie", "from=server; Path=/")])
            rawserver = await asyncio.start_server(raw, "127.0.0.1", 0)
            deflating = await websockets.serve(handler, "127.0.0.1", 0, max_size=None, compression="deflate", ping_interval=None)
            port = server.sockets[0].getsockname()[1]
            rawport = rawserver.sockets[0].getsockname()[1]
            deflateport = deflating.sockets[0].getsockname()[1]
            with open(ports_file + ".tmp", "w") as f: f.write("%d %d %d\n" % (port, rawport, deflateport))
            os.rename(ports_file + ".tmp", ports_file)
            print("serving", port, rawport, flush=True)
            await asyncio.Future()

        asyncio.run(main())
        """#
}
