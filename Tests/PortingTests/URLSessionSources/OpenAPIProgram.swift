// Written with swift-openapi-runtime and swift-openapi-urlsession's
// transport, as a generated client calls it: a path-only request, a base
// URL, bodies as HTTPBody.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import OpenAPIRuntime
import OpenAPIURLSession
import Testing

@Test("Ported: a generated client's calls through URLSessionTransport")
func portedOpenAPITransport() async throws {
    let origin = try await TestOrigin.start()
    origin.route("/api/greet") { request in ScriptedResponse(body: "hello \(request.query ?? "nobody")") }
    origin.route("/api/echo") { request in ScriptedResponse(status: 201, body: request.body) }
    let transport = URLSessionTransport(configuration: .init(session: URLSession(configuration: .ephemeral)))

    let greet = HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/greet?name=ada")
    let (response, body) = try await transport.send(greet, body: nil, baseURL: origin.url("/api"), operationID: "greet")
    #expect(response.status == .ok)
    #expect(try await String(collecting: try #require(body), upTo: 1024) == "hello name=ada")

    var echo = HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/echo")
    echo.headerFields[.contentType] = "application/json"
    let (created, echoed) = try await transport.send(echo, body: HTTPBody("{\"a\":1}"), baseURL: origin.url("/api"), operationID: "echo")
    #expect(created.status == .created)
    #expect(try await String(collecting: try #require(echoed), upTo: 1024) == "{\"a\":1}")
    #expect(origin.requests(to: "/api/echo").first?.header("Content-Type") == "application/json")
    try await origin.shutdown()
}
