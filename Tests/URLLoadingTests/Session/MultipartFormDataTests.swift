import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport
@testable import URLLoading

/// The multipart/form-data builder, its output read back by an independent
/// parser (Python's `email` package) and sent by an upload task.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct MultipartFormDataTests {
    static let parser = """
        import sys, json, hashlib, email, email.policy
        body = open(sys.argv[1], 'rb').read()
        head = b'Content-Type: ' + sys.argv[2].encode() + b'\\r\\nMIME-Version: 1.0\\r\\n\\r\\n'
        message = email.message_from_bytes(head + body, policy=email.policy.HTTP)
        parts = []
        for part in message.iter_parts():
            payload = part.get_payload(decode=True)
            parts.append({'name': part.get_param('name', header='content-disposition'), 'filename': part.get_filename(),
                          'type': part.get_content_type(), 'sha256': hashlib.sha256(payload).hexdigest(),
                          'defects': len(part.defects)})
        print(json.dumps({'defects': len(message.defects), 'parts': parts}))
        """

    struct Parsed: Decodable {
        struct Part: Decodable, Equatable {
            var name: String?
            var filename: String?
            var type: String
            var sha256: String
            var defects: Int
        }
        var defects: Int
        var parts: [Part]
    }

    static func hex(_ data: Data) -> String { Hex.string(SHA256.hash(Array(data))) }

    @Test("Fields, in-memory and on-disk files, escaped names; Python's email parser reads back every part; an upload task sends it")
    func builderParsedBack() async throws {
        let directory = TemporaryDirectory()
        let onDisk = directory.url.appendingPathComponent("photo.jpg")
        var generator = SystemRandomNumberGenerator()
        let photo = Data((0..<1_000_000).map { _ in UInt8.random(in: 0...255, using: &generator) })
        try photo.write(to: onDisk)
        let tricky = Data("line one\r\n--not-a-boundary\r\n\r\nend".utf8)
        var form = MultipartFormData()
        form.append("Ann \"the\" Writer\r\nsecond line", name: "author")
        form.append("x", name: "quote\"d\nname")
        form.append(tricky, name: "notes", fileName: "notes.txt", mimeType: "text/plain")
        try form.appendFile(at: onDisk, name: "photo", mimeType: "image/jpeg")
        let body = try form.writeBody()
        defer { try? FileManager.default.removeItem(at: body) }
        let size = try FileManager.default.attributesOfItem(atPath: body.path)[.size] as? Int
        #expect(Int64(size ?? -1) == form.contentLength)
        #expect(try Data(contentsOf: body) == form.makeBody())
        let result = try await ChildProcess.run(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", Self.parser, body.path, form.contentType])
        #expect(result.status == 0, "\(result.standardError)")
        let parsed = try JSONDecoder().decode(Parsed.self, from: Data(result.standardOutput.utf8))
        #expect(parsed.defects == 0)
        #expect(
            parsed.parts == [
                .init(name: "author", filename: nil, type: "text/plain", sha256: Self.hex(Data("Ann \"the\" Writer\r\nsecond line".utf8)), defects: 0),
                .init(name: "quote%22d%0Aname", filename: nil, type: "text/plain", sha256: Self.hex(Data("x".utf8)), defects: 0),
                .init(name: "notes", filename: "notes.txt", type: "text/plain", sha256: Self.hex(tricky), defects: 0),
                .init(name: "photo", filename: "photo.jpg", type: "image/jpeg", sha256: Self.hex(photo), defects: 0),
            ])
        let origin = try await TestOrigin.start()
        origin.route("/upload", response: ScriptedResponse(body: "stored"))
        var request = URLRequest(url: origin.url("/upload"))
        request.httpMethod = "POST"
        request.setValue(form.contentType, forHTTPHeaderField: "Content-Type")
        let session = Session(configuration: .ephemeral)
        let (_, response) = try await session.upload(for: request, fromFile: body)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(origin.requests.first.map { Data($0.body) } == (try Data(contentsOf: body)))
        #expect(origin.requests.first?.header("Content-Type") == form.contentType)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
