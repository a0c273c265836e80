package import Foundation
#if canImport(FoundationNetworking)
package import FoundationNetworking
#endif

/// A response as the cache tiers hold it: header fields in compact form, the
/// body, the times RFC 9111 needs, and the application's data. The
/// `HTTPURLResponse` a user sees is built from it only when handed out.
package struct StoredResponse: Sendable, Equatable {
    /// The request URL, as given.
    package var url: String
    /// The primary cache key (`CachePolicy.primaryKey`).
    package var key: String
    /// The secondary key (Vary), empty without Vary.
    package var variant: String
    /// Status, header fields and times.
    package var entry: CachePolicy.Entry
    /// The body, when it is held in memory (empty when `bodyFile` holds it).
    package var body: Data
    /// The disk tier's body file, for bodies stored beside the database:
    /// read in chunks as they are delivered.
    package var bodyFile: StoredBodyFile?
    /// When the cache stored it (seconds since 1970).
    package var storedAt: Double
    package var storagePolicy: CacheStoragePolicy
    package var userInfo: CacheUserInfo

    /// Request fields whose values are secrets: a stored request keeps only
    /// a SHA-256 fingerprint of them, enough for Vary to compare.
    static let secretRequestFields: Set<String> = ["authorization", "proxy-authorization", "cookie", credentialsField]

    /// A request field of the cache's own, never sent: who the request's
    /// credentials say the user is (URL user info, an Authorization the
    /// caller set or the session adds). Responses to requests with
    /// different credentials are different entries, as if every response
    /// said `Vary` on it: one user's private page is never another's. A
    /// response stored without credentials serves requests with or without.
    package static let credentialsField = "urlloading-credentials"

    /// Builds a stored response, keeping of the request only the fields the
    /// response's Vary selects on (secrets as fingerprints), and of the
    /// response none of the connection's own fields (RFC 9111 §3.1).
    package init(
        url: String, key: String, status: Int, responseHeaders: HeaderFields, requestHeaders: HeaderFields,
        body: Data, requestTime: Double, responseTime: Double, storedAt: Double,
        storagePolicy: CacheStoragePolicy = .allowed, userInfo: CacheUserInfo = .none
    ) {
        let responseHeaders = CachePolicy.removingConnectionFields(responseHeaders)
        let selecting = Self.selectingFields(responseHeaders: responseHeaders, requestHeaders: requestHeaders)
        self.url = url
        self.key = key
        self.variant = CachePolicy.secondaryKey(responseHeaders: responseHeaders, requestHeaders: selecting)
        self.entry = CachePolicy.Entry(
            status: status, responseHeaders: responseHeaders, requestHeaders: selecting,
            requestTime: requestTime, responseTime: responseTime)
        self.body = body
        self.storedAt = storedAt
        self.storagePolicy = storagePolicy
        self.userInfo = userInfo
    }

    /// Restores a stored response read from disk, fields as they were stored.
    package init(
        url: String, key: String, variant: String, entry: CachePolicy.Entry, body: Data, bodyFile: StoredBodyFile? = nil, storedAt: Double,
        storagePolicy: CacheStoragePolicy, userInfo: CacheUserInfo
    ) {
        self.url = url
        self.key = key
        self.variant = variant
        self.entry = entry
        self.body = body
        self.bodyFile = bodyFile
        self.storedAt = storedAt
        self.storagePolicy = storagePolicy
        self.userInfo = userInfo
    }

    /// The request's fields named by Vary; secret ones replaced by fingerprints.
    static func selectingFields(responseHeaders: HeaderFields, requestHeaders: HeaderFields) -> HeaderFields {
        var fields = HeaderFields()
        if let credentials = requestHeaders[credentialsField] {
            fields.append(credentialsField, fingerprintIfSecret(HeaderFields.Field(credentialsField, credentials)))
        }
        guard let list = CachePolicy.varyFields(responseHeaders), !list.isEmpty else { return fields }
        let names = Set(list)
        for field in requestHeaders where names.contains(field.name.lowercased()) && field.name != credentialsField {
            fields.append(field.name, fingerprintIfSecret(field))
        }
        return fields
    }

    static func fingerprintIfSecret(_ field: HeaderFields.Field) -> String {
        secretRequestFields.contains(field.name.lowercased()) ? "sha256:" + SHA256.hex(field.value) : field.value
    }

    /// The new request's fields as a stored request holds them, for Vary
    /// comparison against `entry.requestHeaders`.
    static func comparableRequestHeaders(_ headers: HeaderFields) -> HeaderFields {
        HeaderFields(headers.map { HeaderFields.Field($0.name, fingerprintIfSecret($0)) })
    }

    /// Bytes counted against a tier's capacity: body, header fields and URL.
    package var cost: Int {
        var total = bodyCount + url.utf8.count + key.utf8.count + variant.utf8.count + 64
        for field in entry.responseHeaders { total += field.name.utf8.count + field.value.utf8.count + 4 }
        for field in entry.requestHeaders { total += field.name.utf8.count + field.value.utf8.count + 4 }
        total += userInfo.encoded.count
        return total
    }

    /// The `HTTPURLResponse` a user sees, with the given header fields.
    package func httpResponse(headers: HeaderFields? = nil) -> HTTPURLResponse? {
        guard let url = URL(string: url) else { return nil }
        var dictionary: [String: String] = [:]
        for field in headers ?? entry.responseHeaders {
            if let existing = dictionary[field.name] {
                dictionary[field.name] = existing + ", " + field.value
            } else {
                dictionary[field.name] = field.value
            }
        }
        return HTTPURLResponse(url: url, statusCode: entry.status, httpVersion: "HTTP/1.1", headerFields: dictionary)
    }
}

/// A compact, total encoding of header lists and userInfo for the disk tier:
/// for each string, a 4-byte little-endian length and its UTF-8. Decoding
/// checks every length and returns nil on a damaged blob.
package enum FieldCoding {
    package static func encode(_ fields: HeaderFields) -> Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(fields.reduce(0) { $0 + 8 + $1.name.utf8.count + $1.value.utf8.count })
        for field in fields {
            append(field.name, to: &bytes)
            append(field.value, to: &bytes)
        }
        return Data(bytes)
    }

    package static func encode(_ dictionary: [String: String]) -> Data {
        var bytes: [UInt8] = []
        for (name, value) in dictionary.sorted(by: { $0.key < $1.key }) {
            append(name, to: &bytes)
            append(value, to: &bytes)
        }
        return Data(bytes)
    }

    package static func decodeFields(_ data: Data) -> HeaderFields? {
        data.withUnsafeBytes { decodeFields($0) }
    }

    /// `decodeFields` of bytes read in place (a disk hit reads the stored
    /// lists where SQLite holds them, without a copy).
    package static func decodeFields(_ raw: UnsafeRawBufferPointer) -> HeaderFields? {
        // Straight into the fields (a disk hit decodes two lists): no
        // array of strings in between.
        let bytes = raw.bindMemory(to: UInt8.self)
        // Counted first (a hop over the lengths): the array is made once, at its size.
        var strings = 0
        var index = 0
        while bytes.count - index >= 4 {
            index += 4 + (Int(bytes[index]) | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2]) << 16 | Int(bytes[index + 3]) << 24)
            strings += 1
        }
        var fields: [HeaderFields.Field] = []
        fields.reserveCapacity(strings / 2)
        index = 0
        while index < bytes.count {
            guard let name = string(bytes, at: &index), let value = string(bytes, at: &index) else { return nil }
            fields.append(HeaderFields.Field(name, value))
        }
        return HeaderFields(fields)
    }

    package static func decodeDictionary(_ data: Data) -> [String: String]? {
        guard let strings = strings(data), strings.count % 2 == 0 else { return nil }
        var dictionary: [String: String] = [:]
        for index in stride(from: 0, to: strings.count, by: 2) { dictionary[strings[index]] = strings[index + 1] }
        return dictionary
    }

    private static func append(_ string: String, to bytes: inout [UInt8]) {
        let count = UInt32(truncatingIfNeeded: string.utf8.count)
        bytes.append(UInt8(count & 0xFF))
        bytes.append(UInt8(count >> 8 & 0xFF))
        bytes.append(UInt8(count >> 16 & 0xFF))
        bytes.append(UInt8(count >> 24))
        bytes.append(contentsOf: string.utf8)
    }

    private static func strings(_ data: Data) -> [String]? {
        data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> [String]? in
            let bytes = raw.bindMemory(to: UInt8.self)
            var strings: [String] = []
            var index = 0
            while index < bytes.count {
                guard let string = string(bytes, at: &index) else { return nil }
                strings.append(string)
            }
            return strings
        }
    }

    /// The length-prefixed string at `index` (a 4-byte little-endian
    /// length, then its bytes), moving past it; nil when the bytes end first.
    private static func string(_ bytes: UnsafeBufferPointer<UInt8>, at index: inout Int) -> String? {
        guard bytes.count - index >= 4 else { return nil }
        let count = Int(bytes[index]) | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2]) << 16 | Int(bytes[index + 3]) << 24
        index += 4
        guard count <= bytes.count - index else { return nil }
        defer { index += count }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[index..<(index + count)]), as: UTF8.self)
    }
}
