// Written with swift-http-types and HTTPTypesFoundation's URLSession
// extension: HTTPRequest in, HTTPResponse out, for data, upload and
// download, and a task's httpResponse.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import HTTPTypesFoundation
import Testing

@Test("Ported: data, upload and download with swift-http-types' HTTPRequest and HTTPResponse")
func portedHTTPTypes() async throws {
    let origin = try await TestOrigin.start()
    origin.route(
        "/fields", response: ScriptedResponse(headers: [HeaderField("Set-Cookie", "a=1"), HeaderField("Set-Cookie", "b=2")], parts: [.bytes(Array("fields".utf8))]))
    origin.route("/upload") { request in ScriptedResponse(status: 201, body: "got \(request.body.count) bytes") }
    let session = URLSession(configuration: .ephemeral)

    let (data, response) = try await session.data(for: HTTPRequest(method: .get, url: origin.url("/fields")))
    #expect(String(decoding: data, as: UTF8.self) == "fields")
    #expect(response.status == .ok && response.status.reasonPhrase == "OK")
    // Each Set-Cookie stays a field of its own (a bridge through
    // HTTPURLResponse would join them into one).
    #expect(response.headerFields[values: .setCookie] == ["a=1", "b=2"])

    let (uploaded, uploadResponse) = try await session.upload(for: HTTPRequest(method: .post, url: origin.url("/upload")), from: Data(repeating: 7, count: 1000))
    #expect(uploadResponse.status.code == 201 && String(decoding: uploaded, as: UTF8.self) == "got 1000 bytes")

    let (location, downloaded) = try await session.download(for: HTTPRequest(method: .get, url: origin.url("/fields")))
    #expect(downloaded.status == .ok && (try? Data(contentsOf: location)) == Data("fields".utf8))
    try? FileManager.default.removeItem(at: location)

    let finished = AsyncStream<Void>.makeStream()
    let task = session.dataTask(with: origin.url("/fields")) { _, _, _ in finished.continuation.finish() }
    task.resume()
    for await _ in finished.stream {}
    #expect(task.originalHTTPRequest?.path == "/fields")
    #expect(task.httpResponse?.headerFields[values: .setCookie] == ["a=1", "b=2"])
    session.invalidateAndCancel()
    try await origin.shutdown()
}
