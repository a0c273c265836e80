import Foundation

/// A `data:` URL's contents (RFC 2397): `data:[<media type>][;base64],<data>`,
/// the data percent-encoded, or base64 after percent-decoding. A task for
/// one is answered without the network, as Apple's session answers it.
struct DataURL: Equatable {
    /// The media type, lower case (`text/plain` when the URL names none).
    var mediaType: String
    /// The `charset` parameter as given (`US-ASCII` when the URL names no
    /// media type, as RFC 2397 §2 says); nil when a media type came without one.
    var charset: String?
    /// The decoded bytes.
    var body: Data

    /// The response's `Content-Type`, from which Foundation derives
    /// `mimeType` and `textEncodingName`.
    var contentType: String {
        charset.map { "\(mediaType);charset=\($0)" } ?? mediaType
    }

    /// Why a `data:` URL cannot be read.
    struct Malformed: Error, Equatable {
        var message: String
    }

    /// Parses the whole URL string; the scheme is matched in any case.
    static func parse(_ string: String) -> Result<DataURL, Malformed> {
        let bytes = Array(string.utf8)
        let scheme = Array("data:".utf8)
        guard bytes.count >= scheme.count, zip(bytes, scheme).allSatisfy({ ($0 | 0x20) == $1 || $0 == $1 }) else {
            return .failure(Malformed(message: "not a data: URL"))
        }
        let rest = bytes[scheme.count...]
        guard let comma = rest.firstIndex(of: UInt8(ascii: ",")) else {
            return .failure(Malformed(message: "a data: URL needs a comma before its data"))
        }
        guard let meta = String(bytes: rest[..<comma], encoding: .utf8)?.removingPercentEncoding else {
            return .failure(Malformed(message: "the data: URL's media type is not valid percent-encoded text"))
        }
        var parameters = meta.split(separator: ";", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        var isBase64 = false
        if parameters.count > 1, parameters.last?.lowercased() == "base64" {
            isBase64 = true
            parameters.removeLast()
        }
        let first = parameters.first ?? ""
        var mediaType = "text/plain"
        var charset: String?
        var namedType = false
        if first.contains("/") && !first.contains("=") {
            guard isToken(first, allowingSlash: true), first.split(separator: "/").count == 2 else {
                return .failure(Malformed(message: "the data: URL's media type is not type/subtype"))
            }
            mediaType = first.lowercased()
            namedType = true
            parameters.removeFirst()
        } else if first.isEmpty {
            parameters.removeFirst()
        }
        for parameter in parameters {
            var pair = parameter.split(separator: "=", maxSplits: 1).map(String.init)
            if pair.count == 2, pair[1].count >= 2, pair[1].hasPrefix("\""), pair[1].hasSuffix("\"") { pair[1] = String(pair[1].dropFirst().dropLast()) }
            guard pair.count == 2, isToken(pair[0], allowingSlash: false), isToken(pair[1], allowingSlash: false) else {
                return .failure(Malformed(message: "the data: URL has a malformed parameter"))
            }
            if pair[0].lowercased() == "charset" { charset = pair[1] }
        }
        if !namedType && charset == nil { charset = "US-ASCII" }
        guard var body = percentDecoded(rest[rest.index(after: comma)...]) else {
            return .failure(Malformed(message: "the data: URL's data has a malformed percent escape"))
        }
        if isBase64 {
            // Padding may be left out (browsers accept that), never overdone.
            let digits = body.filter { !isWhitespace($0) }
            let unpadded = digits.reversed().drop { $0 == UInt8(ascii: "=") }.count
            guard digits.count - unpadded <= 2, unpadded % 4 != 1 else {
                return .failure(Malformed(message: "the data: URL's data is not valid base64"))
            }
            let text = String(decoding: digits.prefix(unpadded), as: UTF8.self) + String(repeating: "=", count: (4 - unpadded % 4) % 4)
            guard let decoded = Data(base64Encoded: text) else {
                return .failure(Malformed(message: "the data: URL's data is not valid base64"))
            }
            body = decoded
        }
        return .success(DataURL(mediaType: mediaType, charset: charset, body: body))
    }

    /// RFC 9110's token characters (and `/` between a type and subtype).
    private static func isToken(_ text: String, allowingSlash: Bool) -> Bool {
        !text.isEmpty
            && text.utf8.allSatisfy { byte in
                (byte == UInt8(ascii: "/") && allowingSlash) || FieldSyntax.isTokenByte(byte)
            }
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\n")
    }

    /// The bytes with each `%XX` escape replaced; nil when an escape is malformed.
    private static func percentDecoded(_ bytes: ArraySlice<UInt8>) -> Data? {
        var out = Data(capacity: bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            guard byte == UInt8(ascii: "%") else {
                out.append(byte)
                index += 1
                continue
            }
            guard index + 2 < bytes.endIndex, let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]) else { return nil }
            out.append(high << 4 | low)
            index += 3
        }
        return out
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
