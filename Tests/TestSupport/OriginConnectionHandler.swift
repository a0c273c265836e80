import Foundation
import NIOCore
import NIOHTTP1

/// One connection of the test origin: collects each request, asks its
/// route's handler, and writes the scripted response byte by byte as told.
/// Requests that arrive while a response is being written wait their turn
/// (HTTP/1.1 pipelining order).
final class OriginConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = ByteBuffer

    /// Writes of `.pattern` parts: large enough to be cheap, small enough
    /// that a slow reader holds back the origin (back-pressure).
    private static let patternWriteSize = 64 * 1024

    private let shared: SharedState
    private let connectionNumber: Int
    private let overTLS: Bool
    private var current: (head: HTTPRequestHead, body: [UInt8], length: Int, file: (handle: FileHandle, url: URL)?)?
    private var queue: [(request: RecordedRequest, keepAlive: Bool)] = []
    private var busy = false
    private var closed = false

    init(shared: SharedState, connectionNumber: Int, overTLS: Bool) {
        self.shared = shared
        self.connectionNumber = connectionNumber
        self.overTLS = overTLS
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            let path = String(head.uri.prefix { $0 != "?" })
            current = (head, [], 0, shared.bodyFile(for: path))
            if head.headers["expect"].contains(where: { $0.lowercased() == "100-continue" }) {
                write(context, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
            }
        case .body(var buffer):
            current?.length += buffer.readableBytes
            if let file = current?.file {
                buffer.withUnsafeReadableBytes { file.handle.write(Data($0)) }
            } else if let bytes = buffer.readBytes(length: buffer.readableBytes) {
                current?.body.append(contentsOf: bytes)
            }
        case .end:
            guard let (head, body, length, file) = current else { return }
            current = nil
            try? file?.handle.close()
            let request = RecordedRequest(
                method: head.method.rawValue, target: head.uri,
                headers: head.headers.map { HeaderField($0.name, $0.value) },
                body: body, bodyFile: file?.url, bodyLength: length, connectionNumber: connectionNumber, overTLS: overTLS)
            queue.append((request, head.isKeepAlive))
            processNext(context)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        shared.state.withLock { $0.open -= 1 }
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        try? current?.file?.handle.close()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A client that sends garbage or vanishes ends its connection only.
        closed = true
        context.close(promise: nil)
    }

    private func processNext(_ context: ChannelHandlerContext) {
        guard !busy, !closed, !queue.isEmpty else { return }
        busy = true
        let (request, keepAlive) = queue.removeFirst()
        let handler = shared.record(request)
        let response = handler?(request) ?? ScriptedResponse(status: 404, body: "no route for \(request.path)\n")
        let keepAliveAfter = keepAlive && !response.closeAfterResponse && response.framing != .closeDelimited
        let headOnly = request.method == "HEAD"
        if let delay = response.delayBeforeHead {
            context.eventLoop.assumeIsolated().scheduleTask(in: .init(delay)) {
                self.send(response, headOnly: headOnly, keepAlive: keepAliveAfter, context: context)
            }
        } else {
            send(response, headOnly: headOnly, keepAlive: keepAliveAfter, context: context)
        }
    }

    private func send(_ response: ScriptedResponse, headOnly: Bool, keepAlive: Bool, context: ChannelHandlerContext) {
        guard !closed else { return }
        write(context, response.rawHead ?? head(of: response, keepAlive: keepAlive))
        let parts = headOnly ? [] : response.parts
        sendParts(parts[...], framing: response.framing, keepAlive: keepAlive, context: context)
    }

    private func head(of response: ScriptedResponse, keepAlive: Bool) -> [UInt8] {
        var text = "HTTP/1.1 \(response.status) \(response.reason ?? ScriptedResponse.reasonPhrase(response.status))\r\n"
        for field in response.headers {
            text += "\(field.name): \(field.value)\r\n"
        }
        switch response.framing {
        case .contentLength where response.header("Content-Length") == nil:
            text += "Content-Length: \(response.bodyLength)\r\n"
        case .contentLength: break
        case .declaredLength(let length): text += "Content-Length: \(length)\r\n"
        case .chunked: text += "Transfer-Encoding: chunked\r\n"
        case .closeDelimited, .none: break
        }
        if !keepAlive { text += "Connection: close\r\n" }
        text += "\r\n"
        return Array(text.utf8)
    }

    /// Sends the parts one after another; each waits for the previous write
    /// to reach the socket, so pauses and back-pressure are real.
    private func sendParts(
        _ parts: ArraySlice<ScriptedResponse.Part>, framing: ScriptedResponse.Framing,
        keepAlive: Bool, context: ChannelHandlerContext
    ) {
        guard !closed else { return }
        guard let part = parts.first else {
            if framing == .chunked { write(context, Array("0\r\n\r\n".utf8)) }
            finish(keepAlive: keepAlive, context: context)
            return
        }
        let rest = parts.dropFirst()
        switch part {
        case .bytes(let bytes):
            writeThen(context, bytes, framing: framing) {
                self.sendParts(rest, framing: framing, keepAlive: keepAlive, context: context)
            }
        case .pattern(let offset, let count):
            guard count > 0 else {
                sendParts(rest, framing: framing, keepAlive: keepAlive, context: context)
                return
            }
            let size = min(count, Self.patternWriteSize)
            let chunk = TestOrigin.pattern(offset: offset, count: size)
            var remaining = rest
            if count > size {
                remaining.insert(.pattern(offset: offset + size, count: count - size), at: remaining.startIndex)
            }
            let next = remaining
            writeThen(context, chunk, framing: framing) {
                self.sendParts(next, framing: framing, keepAlive: keepAlive, context: context)
            }
        case .pause(let duration):
            context.eventLoop.assumeIsolated().scheduleTask(in: .init(duration)) {
                self.sendParts(rest, framing: framing, keepAlive: keepAlive, context: context)
            }
        case .waitFor(let gate):
            // Opened from the test's thread: back onto this connection's loop.
            let loop = context.eventLoop
            let bound = NIOLoopBound((self, context), eventLoop: loop)
            gate.whenOpen {
                loop.execute {
                    let (handler, context) = bound.value
                    handler.sendParts(rest, framing: framing, keepAlive: keepAlive, context: context)
                }
            }
        case .cycle(let block, let offset, let count):
            guard count > 0, !block.isEmpty else {
                sendParts(rest, framing: framing, keepAlive: keepAlive, context: context)
                return
            }
            // One write of up to 256 KiB, copied from the block in at most a few slices.
            let size = min(count, 4 * Self.patternWriteSize)
            var chunk: [UInt8] = []
            chunk.reserveCapacity(size)
            var position = offset % block.count
            while chunk.count < size {
                let take = min(size - chunk.count, block.count - position)
                chunk.append(contentsOf: block[position..<(position + take)])
                position = (position + take) % block.count
            }
            var remaining = rest
            if count > size {
                remaining.insert(.cycle(of: block, offset: offset + size, count: count - size), at: remaining.startIndex)
            }
            let next = remaining
            writeThen(context, chunk, framing: framing) {
                self.sendParts(next, framing: framing, keepAlive: keepAlive, context: context)
            }
        case .closeConnection:
            closed = true
            context.close(promise: nil)
        }
    }

    private func finish(keepAlive: Bool, context: ChannelHandlerContext) {
        if keepAlive {
            busy = false
            processNext(context)
        } else {
            closed = true
            context.close(promise: nil)
        }
    }

    private func write(_ context: ChannelHandlerContext, _ bytes: [UInt8]) {
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
    }

    private func writeThen(
        _ context: ChannelHandlerContext, _ bytes: [UInt8], framing: ScriptedResponse.Framing,
        _ next: @escaping () -> Void
    ) {
        var buffer = context.channel.allocator.buffer(capacity: bytes.count + 16)
        if framing == .chunked {
            guard !bytes.isEmpty else { return next() }
            buffer.writeString(String(bytes.count, radix: 16) + "\r\n")
            buffer.writeBytes(bytes)
            buffer.writeString("\r\n")
        } else {
            buffer.writeBytes(bytes)
        }
        let count = bytes.count
        let write = shared.state.withLock { state in
            state.writesStarted += 1
            state.waitingWrites[state.writesStarted] = .now
            return state.writesStarted
        }
        context.writeAndFlush(wrapOutboundOut(buffer)).assumeIsolated().whenComplete { result in
            self.shared.state.withLock { state in
                state.waitingWrites[write] = nil
                if case .success = result { state.bodyBytesWritten += count }
            }
            guard case .success = result else {
                self.closed = true
                return
            }
            // A write the socket took at once completes inside writeAndFlush:
            // going on from a new event-loop turn keeps the stack flat for a
            // body of any length (a 1 GiB body is 16,384 writes).
            context.eventLoop.assumeIsolated().execute { next() }
        }
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
