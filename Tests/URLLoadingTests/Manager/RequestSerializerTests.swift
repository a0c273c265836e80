import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import URLLoading

/// The manager's request serializer without sockets.
@Suite struct RequestSerializerTests {
    static let url = URL(string: "https://api.example.com/v1/items?fixed=1")!

    @Test("Query parameters: keys sorted, nested as AFNetworking writes them, reserved characters escaped, Booleans as 1 and 0; appended to an existing query")
    func query() throws {
        let request = try RequestSerializer().request(
            .get, url: Self.url,
            parameters: ["q": "a b&c=d+e", "page": 2, "tags": ["x", "y"], "filter": ["min": 1.5, "on": true] as [String: any Sendable], "none": nil as String?])
        #expect(request.url?.absoluteString == "https://api.example.com/v1/items?fixed=1&filter%5Bmin%5D=1.5&filter%5Bon%5D=1&none&page=2&q=a%20b%26c%3Dd%2Be&tags%5B%5D=x&tags%5B%5D=y")
        #expect(request.httpBody == nil && request.httpMethod == "GET")
    }

    @Test("Form and JSON bodies for other methods; GET, HEAD and DELETE keep parameters in the query; a caller's Content-Type stands")
    func bodies() throws {
        let form = try RequestSerializer().request(.post, url: Self.url, parameters: ["a": 1, "b": "x y"])
        #expect(form.httpBody == Data("a=1&b=x%20y".utf8))
        #expect(form.value(forHTTPHeaderField: "Content-Type") == "application/x-www-form-urlencoded")
        let json = try RequestSerializer(encoding: .json).request(.patch, url: Self.url, parameters: ["a": [1, 2], "b": ["c": JSONValue.null] as [String: any Sendable]])
        #expect(json.httpBody == Data(#"{"a":[1,2],"b":{"c":null}}"#.utf8))
        #expect(json.value(forHTTPHeaderField: "Content-Type") == "application/json")
        let delete = try RequestSerializer(encoding: .json).request(.delete, url: Self.url, parameters: ["id": 7])
        #expect(delete.url?.query == "fixed=1&id=7" && delete.httpBody == nil)
        let own = try RequestSerializer(encoding: .json).request(.post, url: Self.url, parameters: ["a": 1], headers: ["content-type": "application/vnd.x+json"])
        #expect(own.value(forHTTPHeaderField: "Content-Type") == "application/vnd.x+json")
        struct Item: Encodable, Sendable { var name: String }
        let encoded = try RequestSerializer().request(.put, url: Self.url, json: Item(name: "Ann"))
        #expect(encoded.httpBody == Data(#"{"name":"Ann"}"#.utf8))
    }

    @Test("A parameter that is not a string, number, Boolean, null, array or dictionary fails before anything is built, naming it")
    func unsupported() {
        let error = #expect(throws: ManagerError.self) {
            try RequestSerializer().request(.get, url: Self.url, parameters: ["when": ["at": Date()] as [String: any Sendable]])
        }
        #expect(error?.kind == .parameterEncodingFailed)
        #expect(error?.message.contains("when[at]") == true, "\(String(describing: error))")
        #expect(throws: ManagerError.self) { try RequestSerializer().request(.post, url: Self.url, parameters: ["x": Double.nan]) }
    }

    @Test("Default header fields go on every request; the call's own fields, in any case, win")
    func headers() throws {
        var serializer = RequestSerializer()
        serializer.headers = ["Accept": "application/json", "X-Client": "a"]
        let request = try serializer.request(.get, url: Self.url, parameters: nil, headers: ["accept": "text/plain"])
        #expect(request.value(forHTTPHeaderField: "Accept") == "text/plain" && request.value(forHTTPHeaderField: "X-Client") == "a")
    }

    @Test("Paths resolve against the base URL as URL(string:relativeTo:) does, the base taken as a folder")
    func baseURL() throws {
        let manager = HTTPSessionManager(baseURL: URL(string: "https://api.example.com/v1"), configuration: .ephemeral)
        defer { manager.invalidateSession(cancelingTasks: true) }
        #expect(try manager.url("users").absoluteString == "https://api.example.com/v1/users")
        #expect(try manager.url("/root").absoluteString == "https://api.example.com/root")
        #expect(try manager.url("users?x=1").absoluteString == "https://api.example.com/v1/users?x=1")
        #expect(try manager.url("https://other.example/a").absoluteString == "https://other.example/a")
        let bare = HTTPSessionManager(configuration: .ephemeral)
        defer { bare.invalidateSession(cancelingTasks: true) }
        #expect(throws: ManagerError.self) { try bare.url("relative") }
    }
}
