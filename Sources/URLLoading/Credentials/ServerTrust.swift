import Foundation

/// What a TLS server showed, for a server-trust challenge: its
/// certificate chain, whether it verifies against the configured roots, and
/// the public key hashes a delegate pins.
public struct ServerTrust: Sendable, Hashable, CustomStringConvertible {
    /// The server's host.
    public var host: String
    /// The server's port.
    public var port: Int
    /// The certificates, leaf first, as PEM.
    public var certificates: [String]
    /// Whether the chain verifies against the configuration's trust roots
    /// (the system's by default), host name included.
    public var isTrustedByRoots: Bool
    /// For each certificate, leaf first, the SHA-256 of its
    /// SubjectPublicKeyInfo in base64: the form of HPKP pins and of curl's
    /// `--pinnedpubkey sha256//...`. Empty strings for certificates that
    /// could not be read.
    public var publicKeyHashes: [String]

    /// A trust from a chain of PEM certificates.
    public init(host: String, port: Int, certificates: [String], isTrustedByRoots: Bool) {
        self.host = host
        self.port = port
        self.certificates = certificates
        self.isTrustedByRoots = isTrustedByRoots
        self.publicKeyHashes = certificates.map { Certificate.publicKeyHash(pem: $0) ?? "" }
    }

    /// The leaf's public key hash, if readable.
    public var leafPublicKeyHash: String? { publicKeyHashes.first.flatMap { $0.isEmpty ? nil : $0 } }

    /// Host, chain length and verdict.
    public var description: String {
        "ServerTrust(\(host):\(port), \(certificates.count) certificates, \(isTrustedByRoots ? "trusted" : "not trusted") by the roots)"
    }
}

/// Just enough X.509 (DER) to find a certificate's SubjectPublicKeyInfo.
enum Certificate {
    /// The DER bytes of a PEM certificate.
    static func der(pem: String) -> [UInt8]? {
        let body = pem.split(whereSeparator: \.isNewline)
            .filter { !$0.hasPrefix("-----") }
            .joined()
        return Data(base64Encoded: body).map { Array($0) }
    }

    /// SHA-256 of the SubjectPublicKeyInfo, base64.
    static func publicKeyHash(pem: String) -> String? {
        guard let der = der(pem: pem), let spki = subjectPublicKeyInfo(der) else { return nil }
        return Data(SHA256.hash(spki)).base64EncodedString()
    }

    /// One DER element: its tag, where its content lies, where it ends.
    struct Element {
        var tag: UInt8
        var content: Range<Int>
        var whole: Range<Int>
    }

    static func element(_ bytes: [UInt8], at start: Int) -> Element? {
        guard start + 2 <= bytes.count else { return nil }
        let tag = bytes[start]
        var index = start + 1
        var length = Int(bytes[index])
        index += 1
        if length & 0x80 != 0 {
            let count = length & 0x7F
            guard (1...4).contains(count), index + count <= bytes.count else { return nil }
            length = bytes[index..<(index + count)].reduce(0) { $0 << 8 | Int($1) }
            index += count
        }
        guard length >= 0, index + length <= bytes.count else { return nil }
        return Element(tag: tag, content: index..<(index + length), whole: start..<(index + length))
    }

    static func children(_ bytes: [UInt8], of parent: Element) -> [Element] {
        var result: [Element] = []
        var index = parent.content.lowerBound
        while index < parent.content.upperBound, let child = element(bytes, at: index) {
            result.append(child)
            index = child.whole.upperBound
        }
        return result
    }

    /// Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version
    /// OPTIONAL, serial, signature, issuer, validity, subject,
    /// subjectPublicKeyInfo, ... }, ... }
    static func subjectPublicKeyInfo(_ der: [UInt8]) -> [UInt8]? {
        guard let certificate = element(der, at: 0), certificate.tag == 0x30,
            let tbs = children(der, of: certificate).first, tbs.tag == 0x30
        else { return nil }
        var fields = children(der, of: tbs)
        if fields.first?.tag == 0xA0 { fields.removeFirst() }
        guard fields.count > 5, fields[5].tag == 0x30 else { return nil }
        return Array(der[fields[5].whole])
    }
}
