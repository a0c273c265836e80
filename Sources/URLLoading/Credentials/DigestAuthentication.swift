import Foundation
import Transport

/// Basic authentication (RFC 7617): `user:password` in UTF-8, base64.
enum BasicAuthentication {
    /// The Authorization field value; nil when the user name holds a colon,
    /// which the scheme cannot carry.
    static func authorization(user: String, password: String) -> String? {
        guard !user.contains(":") else { return nil }
        // RFC 7617 §2.1: UTF-8, in Normalization Form C.
        let pair = (user + ":" + password).precomposedStringWithCanonicalMapping
        return "Basic " + Data(pair.utf8).base64EncodedString()
    }
}

/// A Digest challenge (RFC 7616) and the Authorization values answering it.
struct DigestChallenge: Sendable, Equatable {
    enum Algorithm: String, Sendable, CaseIterable {
        case md5 = "MD5"
        case md5Session = "MD5-sess"
        case sha256 = "SHA-256"
        case sha256Session = "SHA-256-sess"
        case sha512_256 = "SHA-512-256"
        case sha512_256Session = "SHA-512-256-sess"

        var isSession: Bool { rawValue.hasSuffix("-sess") }

        /// Lower-case hex of the digest of `text`'s UTF-8.
        func hex(_ text: String) -> String {
            let bytes = Array(text.utf8)
            let digest: [UInt8]
            switch self {
            case .md5, .md5Session: digest = MD5.hash(bytes)
            case .sha256, .sha256Session: digest = SHA256.hash(bytes)
            case .sha512_256, .sha512_256Session: digest = SHA512_256.hash(bytes)
            }
            return Hex.string(digest)
        }

        /// Preference among several offered challenges: stronger first.
        var strength: Int {
            switch self {
            case .sha512_256, .sha512_256Session: return 3
            case .sha256, .sha256Session: return 2
            case .md5, .md5Session: return 1
            }
        }
    }

    var realm: String
    var nonce: String
    var opaque: String?
    var algorithm: Algorithm
    /// The challenge named its algorithm (then the answer names it too).
    var algorithmGiven: Bool
    /// qop=auth was offered (auth-int alone is not supported: it would need the whole body first).
    var offersAuth: Bool
    var qopGiven: Bool
    var userhash: Bool
    var stale: Bool

    /// Reads a Digest challenge; nil when it is not one we can answer
    /// (no nonce, an unknown algorithm, only qop=auth-int).
    init?(_ challenge: AuthChallenge) {
        guard challenge.isScheme("Digest"), let nonce = challenge[parameter: "nonce"] else { return nil }
        self.realm = challenge.realm ?? ""
        self.nonce = nonce
        self.opaque = challenge[parameter: "opaque"]
        if let name = challenge[parameter: "algorithm"] {
            guard let algorithm = Algorithm.allCases.first(where: { $0.rawValue.lowercased() == name.lowercased() }) else { return nil }
            self.algorithm = algorithm
            self.algorithmGiven = true
        } else {
            self.algorithm = .md5
            self.algorithmGiven = false
        }
        if let qop = challenge[parameter: "qop"] {
            let options = FieldList.members(qop).map { $0.lowercased() }
            guard options.contains("auth") else { return nil }
            self.offersAuth = true
            self.qopGiven = true
        } else {
            self.offersAuth = false
            self.qopGiven = false
        }
        self.userhash = challenge[parameter: "userhash"]?.lowercased() == "true"
        self.stale = challenge[parameter: "stale"]?.lowercased() == "true"
    }

    /// The response digest and the Authorization field value.
    ///
    /// - Parameters:
    ///   - nonceCount: This request's use of the nonce, from 1.
    ///   - cnonce: The client nonce (random per request; fixed in tests).
    func authorization(user: String, password: String, method: String, uri: String, nonceCount: UInt32, cnonce: String) -> (response: String, field: String) {
        let nc = String(format: "%08x", nonceCount)
        var ha1 = algorithm.hex("\(user):\(realm):\(password)")
        if algorithm.isSession { ha1 = algorithm.hex("\(ha1):\(nonce):\(cnonce)") }
        let ha2 = algorithm.hex("\(method):\(uri)")
        let response =
            offersAuth
            ? algorithm.hex("\(ha1):\(nonce):\(nc):\(cnonce):auth:\(ha2)")
            : algorithm.hex("\(ha1):\(nonce):\(ha2)")
        var parts: [String] = []
        if userhash {
            parts.append("username=\(Self.quoted(algorithm.hex("\(user):\(realm)")))")
        } else if user.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) {
            parts.append("username=\(Self.quoted(user))")
        } else {
            // RFC 7616 §3.4.4: a name that is not ASCII goes in the RFC 8187 form.
            parts.append("username*=UTF-8''\(Self.percentEncoded(user))")
        }
        parts.append("realm=\(Self.quoted(realm))")
        parts.append("nonce=\(Self.quoted(nonce))")
        parts.append("uri=\(Self.quoted(uri))")
        if algorithmGiven { parts.append("algorithm=\(algorithm.rawValue)") }
        if offersAuth {
            parts.append("qop=auth")
            parts.append("nc=\(nc)")
            parts.append("cnonce=\(Self.quoted(cnonce))")
        }
        parts.append("response=\(Self.quoted(response))")
        if let opaque { parts.append("opaque=\(Self.quoted(opaque))") }
        if userhash { parts.append("userhash=true") }
        return (response, "Digest " + parts.joined(separator: ", "))
    }

    /// A quoted-string with `"` and `\` escaped.
    static func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    static func percentEncoded(_ text: String) -> String {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$&+-.^_`|~".utf8)
        return text.utf8.map { allowed.contains($0) ? String(UnicodeScalar($0)) : String(format: "%%%02X", $0) }.joined()
    }

    /// A new random client nonce.
    static func makeClientNonce() -> String {
        Hex.random(bytes: 16)
    }
}
