public import Foundation

/// A `multipart/form-data` body (RFC 7578, with the HTML standard's
/// escaping), as AFNetworking's `constructingBodyWithBlock` builds it: text
/// fields, in-memory files and files on disk, written out by streaming each
/// file in chunks, so a form with a large file costs constant memory.
///
/// ```swift
/// var form = MultipartFormData()
/// form.append("Ann", name: "author")
/// try form.appendFile(at: photo, name: "photo", mimeType: "image/jpeg")
/// var request = URLRequest(url: upload)
/// request.httpMethod = "POST"
/// request.setValue(form.contentType, forHTTPHeaderField: "Content-Type")
/// let body = try form.writeBody()          // a temporary file
/// session.uploadTask(with: request, fromFile: body).resume()
/// ```
public struct MultipartFormData: Sendable {
    private enum Content: Sendable {
        case data(Data)
        case file(URL, length: Int64)
    }

    private struct Part: Sendable {
        var headers: String
        var content: Content
    }

    /// The boundary between parts (random; never inside a field's bytes by
    /// construction of 128 random bits).
    public let boundary: String
    private var parts: [Part] = []

    /// An empty form with a random boundary, or the one given.
    public init(boundary: String? = nil) {
        self.boundary = boundary ?? ("URLLoading-" + Hex.random(bytes: 16))
    }

    /// The Content-Type field value for the request.
    public var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    /// A text field.
    public mutating func append(_ value: String, name: String) {
        parts.append(Part(headers: "Content-Disposition: form-data; name=\"\(Self.escaped(name))\"\r\n", content: .data(Data(value.utf8))))
    }

    /// A file from memory.
    public mutating func append(_ data: Data, name: String, fileName: String, mimeType: String = "application/octet-stream") {
        parts.append(Part(headers: Self.fileHeaders(name: name, fileName: fileName, mimeType: mimeType), content: .data(data)))
    }

    /// A file from disk, read when the body is written.
    ///
    /// - Throws: The file system's error when the file cannot be read.
    public mutating func appendFile(at url: URL, name: String, fileName: String? = nil, mimeType: String = "application/octet-stream") throws {
        let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        let length = (attributes[.size] as? Int64) ?? Int64((attributes[.size] as? Int) ?? 0)
        parts.append(
            Part(
                headers: Self.fileHeaders(name: name, fileName: fileName ?? url.lastPathComponent, mimeType: mimeType),
                content: .file(url, length: length)))
    }

    /// The body's length in bytes.
    public var contentLength: Int64 {
        var total: Int64 = 0
        for part in parts {
            total += Int64(opening(part).utf8.count) + 2
            switch part.content {
            case .data(let data): total += Int64(data.count)
            case .file(_, let length): total += length
            }
        }
        return total + Int64(closing.utf8.count)
    }

    /// Writes the body to a new temporary file (mode 0600) and returns it;
    /// files are copied in 64 KiB chunks. The caller owns the file.
    ///
    /// - Throws: The file system's error.
    public func writeBody() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("form-\(UUID().uuidString).body")
        let output = try PrivateFile.create(url.path)
        defer { try? output.close() }
        for part in parts {
            try output.write(contentsOf: Data(opening(part).utf8))
            switch part.content {
            case .data(let data):
                try output.write(contentsOf: data)
            case .file(let file, _):
                let input = try FileHandle(forReadingFrom: file)
                defer { try? input.close() }
                while let chunk = try input.read(upToCount: 65_536), !chunk.isEmpty {
                    try output.write(contentsOf: chunk)
                }
            }
            try output.write(contentsOf: Data("\r\n".utf8))
        }
        try output.write(contentsOf: Data(closing.utf8))
        return url
    }

    /// The body in memory, for small forms.
    ///
    /// - Throws: The file system's error when a file part cannot be read.
    public func makeBody() throws -> Data {
        var body = Data()
        for part in parts {
            body.append(Data(opening(part).utf8))
            switch part.content {
            case .data(let data): body.append(data)
            case .file(let file, _): body.append(try Data(contentsOf: file))
            }
            body.append(Data("\r\n".utf8))
        }
        body.append(Data(closing.utf8))
        return body
    }

    private func opening(_ part: Part) -> String { "--\(boundary)\r\n\(part.headers)\r\n" }
    private var closing: String { "--\(boundary)--\r\n" }

    private static func fileHeaders(name: String, fileName: String, mimeType: String) -> String {
        let type = mimeType.contains(where: { $0 == "\r" || $0 == "\n" }) ? "application/octet-stream" : mimeType
        return "Content-Disposition: form-data; name=\"\(escaped(name))\"; filename=\"\(escaped(fileName))\"\r\nContent-Type: \(type)\r\n"
    }

    /// The HTML standard's escaping of names and file names: `"` as %22,
    /// CR as %0D, LF as %0A; everything else as UTF-8.
    static func escaped(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "%22"
            case "\r": result += "%0D"
            case "\n": result += "%0A"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}
