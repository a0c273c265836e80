import Foundation

/// Turns the bytes a peer sends into messages and control frames (RFC 6455
/// §5, §6.2, §8.1): a pure state machine, bytes in, events out, so every
/// rule is tested without a socket. A violation ends the reading with the
/// close code the RFC names; nothing after it is read.
///
/// ```
/// header ─whole header→ payload(remaining) ─0 left→ header
///    └─violation─→ failed            close frame → closed
/// ```
struct WebSocketReader: Sendable {
    /// What the bytes said.
    enum Event: Equatable, Sendable {
        case text(String)
        case binary(Data)
        case ping(Data)
        case pong(Data)
        /// The peer's close frame: its code (nil when it sent none: 1005)
        /// and reason. Nothing is read after it.
        case close(code: UInt16?, reason: String)
        /// The peer broke the protocol: close with `code` (1002, 1007,
        /// 1009, ...) and say `reason`. Nothing is read after it.
        case failed(code: UInt16, reason: String)
        /// A whole message whose frames said it is compressed (RSV1), as
        /// read: the owner inflates it.
        case compressed(Data, isText: Bool)
    }

    /// Which end reads: a client reads a server's unmasked frames, a server
    /// a client's masked ones (§5.1).
    enum Role: Sendable {
        case client, server
    }

    /// The largest message (after decompression) accepted; past it, 1009.
    let maximumMessageSize: Int
    let role: Role
    /// Messages may be compressed (RSV1): permessage-deflate was
    /// negotiated. A compressed message's payload is handed over as read;
    /// its owner inflates it (RFC 7692) and checks its text.
    let allowsCompression: Bool

    private enum Phase: Sendable {
        case header
        case payload(Header, remaining: Int)
        case ended
    }

    private struct Header: Sendable {
        var fin: Bool
        var compressed: Bool
        var opcode: WebSocketFrame.Opcode
        var mask: [UInt8]?
        var length: Int
        /// Bytes of this payload read so far (where the mask stands).
        var read = 0
    }

    /// A data message under way (between its first frame and its FIN).
    private struct Message: Sendable {
        var isText: Bool
        var compressed: Bool
        /// An array, not Data: Data's append here copied the whole message
        /// at each 64 KiB (100 MiB took 50 s); an array grows geometrically.
        var bytes: [UInt8] = []
        var validator = UTF8Validator()
    }

    private var phase = Phase.header
    private var pending: [UInt8] = []
    private var message: Message?
    /// The payload of the control frame being read.
    private var control: [UInt8] = []

    init(role: Role, maximumMessageSize: Int, allowsCompression: Bool = false) {
        self.role = role
        self.maximumMessageSize = max(0, maximumMessageSize)
        self.allowsCompression = allowsCompression
    }

    /// True once a close frame or a violation ended the reading.
    var hasEnded: Bool {
        if case .ended = phase { true } else { false }
    }

    /// Reads `bytes`; returns what they completed, in order.
    mutating func read(_ bytes: UnsafeRawBufferPointer) -> [Event] {
        var events: [Event] = []
        var input = bytes[...]
        while true {
            switch phase {
            case .ended:
                return events
            case .header:
                if !pending.isEmpty || input.count < 14 {
                    // A header in pieces: gather at most what it needs.
                    let wanted = Self.headerLength(pending + input.prefix(2))
                    let take = min(input.count, max(0, (wanted ?? 2) - pending.count))
                    pending += input.prefix(take)
                    input = input.dropFirst(take)
                    guard let length = Self.headerLength(pending), pending.count >= length else {
                        if input.isEmpty { return events }
                        continue
                    }
                    let header = pending
                    pending = []
                    if let failure = begin(header, events: &events) {
                        events.append(failure)
                        phase = .ended
                    }
                } else {
                    guard let length = Self.headerLength(Array(input.prefix(2))) else { return events }
                    let header = Array(input.prefix(length))
                    input = input.dropFirst(length)
                    if let failure = begin(header, events: &events) {
                        events.append(failure)
                        phase = .ended
                    }
                }
            case .payload(var header, let remaining):
                let take = min(remaining, input.count)
                if take == 0, remaining > 0 { return events }
                let chunk = UnsafeRawBufferPointer(rebasing: input.prefix(take))
                input = input.dropFirst(take)
                if let failure = consume(chunk, header: &header) {
                    events.append(failure)
                    phase = .ended
                    continue
                }
                header.read += take
                if remaining - take > 0 {
                    phase = .payload(header, remaining: remaining - take)
                    return events
                }
                phase = .header
                if let event = finish(header) {
                    events.append(event)
                    if case .close = event { phase = .ended } else if case .failed = event { phase = .ended }
                }
            }
        }
    }

    /// The whole header's length once its first two bytes are known.
    private static func headerLength(_ bytes: some Collection<UInt8>) -> Int? {
        guard bytes.count >= 2 else { return nil }
        let second = bytes[bytes.index(after: bytes.startIndex)]
        let extended =
            switch second & 0x7F {
            case 126: 2
            case 127: 8
            default: 0
            }
        return 2 + extended + (second & 0x80 != 0 ? 4 : 0)
    }

    /// Checks a whole header and starts its payload; a failure event, or nil.
    private mutating func begin(_ bytes: [UInt8], events: inout [Event]) -> Event? {
        let first = bytes[0]
        let second = bytes[1]
        let fin = first & 0x80 != 0
        let compressed = first & 0x40 != 0
        if first & 0x30 != 0 { return .failed(code: WebSocketFrame.Code.protocolError, reason: "a frame with a reserved bit set (RSV2/RSV3)") }
        guard let opcode = WebSocketFrame.Opcode(rawValue: first & 0x0F) else {
            return .failed(code: WebSocketFrame.Code.protocolError, reason: "a frame with the reserved opcode \(first & 0x0F)")
        }
        let masked = second & 0x80 != 0
        if masked != (role == .server) {
            return .failed(
                code: WebSocketFrame.Code.protocolError, reason: role == .client ? "the server masked a frame" : "the client sent an unmasked frame")
        }
        var length = 0
        var offset = 2
        switch second & 0x7F {
        case 126:
            length = Int(bytes[2]) << 8 | Int(bytes[3])
            offset = 4
        case 127:
            var value: UInt64 = 0
            for byte in bytes[2..<10] { value = value << 8 | UInt64(byte) }
            guard value >> 63 == 0 else { return .failed(code: WebSocketFrame.Code.protocolError, reason: "a frame length with its top bit set") }
            // Past any message this reader accepts: refused before a byte of it is kept.
            guard value <= UInt64(Int.max / 2) else {
                return .failed(code: WebSocketFrame.Code.messageTooBig, reason: "a frame of \(value) bytes")
            }
            length = Int(value)
            offset = 10
        default:
            length = Int(second & 0x7F)
        }
        let mask = masked ? Array(bytes[offset..<(offset + 4)]) : nil
        if opcode.isControl {
            if !fin { return .failed(code: WebSocketFrame.Code.protocolError, reason: "a fragmented control frame") }
            if length > WebSocketFrame.maximumControlPayload {
                return .failed(code: WebSocketFrame.Code.protocolError, reason: "a control frame of \(length) bytes (at most 125)")
            }
            if compressed { return .failed(code: WebSocketFrame.Code.protocolError, reason: "a compressed control frame") }
            control = []
        } else if opcode == .continuation {
            guard message != nil else { return .failed(code: WebSocketFrame.Code.protocolError, reason: "a continuation frame with no message under way") }
            if compressed { return .failed(code: WebSocketFrame.Code.protocolError, reason: "RSV1 on a continuation frame") }
        } else {
            if message != nil { return .failed(code: WebSocketFrame.Code.protocolError, reason: "a new message before the last one's final frame") }
            if compressed, !allowsCompression {
                return .failed(code: WebSocketFrame.Code.protocolError, reason: "a compressed frame without permessage-deflate")
            }
            message = Message(isText: opcode == .text, compressed: compressed)
        }
        if !opcode.isControl, let message, message.bytes.count + length > maximumMessageSize {
            return .failed(code: WebSocketFrame.Code.messageTooBig, reason: "a message over \(maximumMessageSize) bytes")
        }
        // Room for the frame at once (within the maximum, just checked).
        if !opcode.isControl, length > 0, let kept = message?.bytes.count { message?.bytes.reserveCapacity(kept + length) }
        let header = Header(fin: fin, compressed: compressed, opcode: opcode, mask: mask, length: length)
        phase = .payload(header, remaining: length)
        if length == 0 {
            phase = .header
            if let event = finish(header) {
                if case .failed = event { return event }
                events.append(event)
                if case .close = event { phase = .ended }
            }
        }
        return nil
    }

    /// Takes a piece of the current payload (unmasked here); a failure or nil.
    private mutating func consume(_ chunk: UnsafeRawBufferPointer, header: inout Header) -> Event? {
        guard let mask = header.mask else { return take(chunk, header: header) }
        var bytes = [UInt8](chunk)
        return bytes.withUnsafeMutableBytes { unmasked in
            WebSocketFrame.applyMask(mask, to: unmasked, offset: header.read)
            return take(UnsafeRawBufferPointer(unmasked), header: header)
        }
    }

    /// Keeps unmasked payload bytes: a control frame's, or the message's
    /// (text checked as it comes).
    private mutating func take(_ bytes: UnsafeRawBufferPointer, header: Header) -> Event? {
        if header.opcode.isControl {
            control += bytes
            return nil
        }
        guard var current = message else { return nil }
        message = nil
        defer { message = current }
        if current.isText, !current.compressed, !current.validator.feed(bytes) {
            return .failed(code: WebSocketFrame.Code.invalidFramePayloadData, reason: "a text message that is not UTF-8")
        }
        current.bytes.append(contentsOf: bytes.bindMemory(to: UInt8.self))
        return nil
    }

    /// The end of a frame: a control frame's event, or a message's at its FIN.
    private mutating func finish(_ header: Header) -> Event? {
        switch header.opcode {
        case .ping: return .ping(Data(control))
        case .pong: return .pong(Data(control))
        case .close: return Self.close(control)
        case .continuation, .text, .binary:
            guard header.fin, let current = message else { return nil }
            message = nil
            if current.compressed { return .compressed(Data(current.bytes), isText: current.isText) }
            guard current.isText else { return .binary(Data(current.bytes)) }
            guard current.validator.isComplete else {
                return .failed(code: WebSocketFrame.Code.invalidFramePayloadData, reason: "a text message that ends inside a UTF-8 sequence")
            }
            return .text(String(decoding: current.bytes, as: UTF8.self))
        }
    }

    /// A close frame's payload read (§5.5.1, §7.1.5).
    private static func close(_ payload: [UInt8]) -> Event {
        guard !payload.isEmpty else { return .close(code: nil, reason: "") }
        guard payload.count >= 2 else { return .failed(code: WebSocketFrame.Code.protocolError, reason: "a close frame with a 1-byte payload") }
        let code = UInt16(payload[0]) << 8 | UInt16(payload[1])
        guard WebSocketFrame.Code.mayBeSent(code) else { return .failed(code: WebSocketFrame.Code.protocolError, reason: "a close frame with the code \(code)") }
        let reason = payload[2...]
        guard UTF8Validator.isValid(reason) else {
            return .failed(code: WebSocketFrame.Code.invalidFramePayloadData, reason: "a close reason that is not UTF-8")
        }
        return .close(code: code, reason: String(decoding: reason, as: UTF8.self))
    }
}
