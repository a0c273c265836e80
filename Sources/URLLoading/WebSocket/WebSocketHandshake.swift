import Foundation
import Streams
import Transport

/// The opening handshake (RFC 6455 §4.1–4.2): the client's upgrade request
/// and the check of the server's answer. Pure: no socket here.
enum WebSocketHandshake {
    /// §1.3: the GUID appended to the key before hashing.
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
    /// The longest answer head read before giving up.
    static let maximumHead = 64 << 10

    /// A fresh `Sec-WebSocket-Key`: 16 random bytes, base64.
    static func makeKey() -> String {
        Data(Digests.randomBytes(16)).base64EncodedString()
    }

    /// The `Sec-WebSocket-Accept` value a server must answer `key` with.
    static func accept(for key: String) -> String {
        Data(Digests.sha1(Array((key + guid).utf8))).base64EncodedString()
    }

    /// The request's bytes: `GET` the URL's path and query, the upgrade
    /// fields, the offered protocols, then `fields` (the caller's, minus
    /// those the handshake owns).
    /// What the client offers of permessage-deflate (RFC 7692 §7.1): any
    /// window the server likes for our messages.
    static let deflateOffer = "permessage-deflate; client_max_window_bits"

    static func request(
        url: URL, key: String, protocols: [String], fields: [(name: String, value: String)], offersDeflate: Bool = false
    ) -> [UInt8] {
        let path = url.path(percentEncoded: true).isEmpty ? "/" : url.path(percentEncoded: true)
        let query = url.query(percentEncoded: true).map { "?" + $0 } ?? ""
        let secure = url.scheme?.lowercased() == "wss"
        let host = url.host(percentEncoded: true) ?? ""
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        let authority = url.port.map { $0 == (secure ? 443 : 80) ? bracketed : "\(bracketed):\($0)" } ?? bracketed
        var text = "GET \(path)\(query) HTTP/1.1\r\nHost: \(authority)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        text += "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
        if !protocols.isEmpty { text += "Sec-WebSocket-Protocol: \(protocols.joined(separator: ", "))\r\n" }
        if offersDeflate { text += "Sec-WebSocket-Extensions: \(deflateOffer)\r\n" }
        let owned: Set<String> = [
            "host", "upgrade", "connection", "sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol", "sec-websocket-extensions",
            "content-length", "transfer-encoding",
        ]
        for field in fields where !owned.contains(field.name.lowercased()) && Self.isToken(field.name) && !Self.hasLineBreak(field.value) {
            text += "\(field.name): \(field.value)\r\n"
        }
        return Array((text + "\r\n").utf8)
    }

    /// What the server's answer said.
    struct Answer: Equatable {
        var status: Int
        var fields: [(name: String, value: String)]
        /// The protocol the server chose, if any.
        var selectedProtocol: String?
        /// permessage-deflate as the server accepted it; nil when not in use.
        var deflate: DeflateParameters?

        static func == (lhs: Answer, rhs: Answer) -> Bool {
            lhs.status == rhs.status && lhs.selectedProtocol == rhs.selectedProtocol && lhs.deflate == rhs.deflate
                && lhs.fields.map { [$0.name, $0.value] } == rhs.fields.map { [$0.name, $0.value] }
        }
    }

    /// The end of the head in `bytes` (the index after its blank line), or nil.
    static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 3..<bytes.count where bytes[index] == 10 && bytes[index - 1] == 13 && bytes[index - 2] == 10 && bytes[index - 3] == 13 {
            return index + 1
        }
        return nil
    }

    /// Checks a whole answer head (§4.1, the client's list): 101, `Upgrade:
    /// websocket`, `Connection: Upgrade`, the accept value for `key`, a
    /// protocol among those offered, no extension not asked for.
    static func check(head: [UInt8], key: String, protocols: [String], offeredDeflate: Bool = false) -> Result<Answer, HandshakeFailure> {
        guard let text = String(validating: head, as: UTF8.self) else { return .failure(HandshakeFailure(status: nil, reason: "the answer's head is not UTF-8")) }
        var lines = text.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ", maxSplits: 2)
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), let status = Int(statusLine[1]), (100...599).contains(status) else {
            return .failure(HandshakeFailure(status: nil, reason: "the answer is not HTTP/1.1"))
        }
        var fields: [(name: String, value: String)] = []
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { return .failure(HandshakeFailure(status: status, reason: "a header line without a colon")) }
            fields.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        func values(_ name: String) -> [String] {
            FieldList.members(fields.filter { $0.name.lowercased() == name }.map(\.value)).map(String.init)
        }
        guard status == 101 else {
            var failure = HandshakeFailure(status: status, reason: "the server answered \(status), not 101 Switching Protocols")
            failure.challenges = fields.filter { $0.name.lowercased() == "www-authenticate" }.map(\.value)
            return .failure(failure)
        }
        guard values("upgrade").contains(where: { $0.lowercased() == "websocket" }) else {
            return .failure(HandshakeFailure(status: status, reason: "the answer lacks Upgrade: websocket"))
        }
        guard values("connection").contains(where: { $0.lowercased() == "upgrade" }) else {
            return .failure(HandshakeFailure(status: status, reason: "the answer lacks Connection: Upgrade"))
        }
        guard fields.first(where: { $0.name.lowercased() == "sec-websocket-accept" })?.value == accept(for: key) else {
            return .failure(HandshakeFailure(status: status, reason: "the answer's Sec-WebSocket-Accept does not match the key"))
        }
        let extensions = fields.filter { $0.name.lowercased() == "sec-websocket-extensions" }.map(\.value).joined(separator: ",")
        var deflate: DeflateParameters?
        if !extensions.trimmingCharacters(in: .whitespaces).isEmpty {
            guard offeredDeflate, let accepted = DeflateParameters(extensions) else {
                return .failure(HandshakeFailure(status: status, reason: "the server chose an extension that was not offered, or with parameters not allowed"))
            }
            deflate = accepted
        }
        let chosen = values("sec-websocket-protocol")
        guard chosen.count <= 1, chosen.allSatisfy(protocols.contains) else {
            return .failure(HandshakeFailure(status: status, reason: "the server chose a protocol that was not offered"))
        }
        return .success(Answer(status: status, fields: fields, selectedProtocol: chosen.first, deflate: deflate))
    }

    /// Why the handshake failed; `status` when the server answered HTTP.
    struct HandshakeFailure: Error, Equatable {
        var status: Int?
        var reason: String
        /// A 401's `WWW-Authenticate` values.
        var challenges: [String] = []
    }

    private static func isToken(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && !"()<>@,;:\\\"/[]?={}".utf8.contains($0) }
    }

    private static func hasLineBreak(_ value: String) -> Bool {
        value.utf8.contains { $0 == 13 || $0 == 10 || $0 == 0 }
    }
}

/// permessage-deflate's parameters in a server's answer (RFC 7692 §7.1).
struct DeflateParameters: Equatable, Sendable {
    var serverNoContextTakeover = false
    var clientNoContextTakeover = false
    var serverMaxWindowBits = 15
    var clientMaxWindowBits = 15

    init(serverNoContextTakeover: Bool, clientNoContextTakeover: Bool, serverMaxWindowBits: Int, clientMaxWindowBits: Int) {
        self.serverNoContextTakeover = serverNoContextTakeover
        self.clientNoContextTakeover = clientNoContextTakeover
        self.serverMaxWindowBits = serverMaxWindowBits
        self.clientMaxWindowBits = clientMaxWindowBits
    }

    /// Reads a `Sec-WebSocket-Extensions` value; nil unless it is exactly
    /// one permessage-deflate with known parameters, each once, in range.
    init?(_ value: String) {
        let extensions = FieldList.members(value, quoted: true)
        guard extensions.count == 1 else { return nil }
        var parts = extensions[0].split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.first?.lowercased() == "permessage-deflate" else { return nil }
        parts.removeFirst()
        var seen = Set<String>()
        for part in parts {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard let first = pair.first else { return nil }
            let name = first.lowercased()
            guard seen.insert(name).inserted else { return nil }
            let raw = pair.count == 2 ? pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")) : nil
            switch name {
            case "server_no_context_takeover":
                guard raw == nil else { return nil }
                serverNoContextTakeover = true
            case "client_no_context_takeover":
                guard raw == nil else { return nil }
                clientNoContextTakeover = true
            case "server_max_window_bits", "client_max_window_bits":
                guard let raw, raw.count <= 2, let bits = Int(raw), (8...15).contains(bits) else { return nil }
                if name == "server_max_window_bits" { serverMaxWindowBits = bits } else { clientMaxWindowBits = bits }
            default:
                return nil
            }
        }
    }
}
