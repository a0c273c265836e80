import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import Transport
@testable import URLLoading

/// Deciding on a hop's head from values alone.
@Suite struct HeadDecisionTests {
    static func request(_ url: String = "https://example.com/a", method: String = "GET") -> URLRequest {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        return request
    }

    static func decide(_ status: Int, _ headers: [(name: String, value: String)] = [], request: URLRequest = request(), firstRequest: Bool = true, revalidating: Bool = false)
        -> HeadDecision
    {
        HeadDecision.of(status: status, headers: headers, request: request, firstRequest: firstRequest, revalidating: revalidating)
    }

    @Test("The order of Apple's delegate calls: challenges, a revalidation's 304, a first request's 5xx, redirects, else the response")
    func order() {
        #expect(Self.decide(401) == .challenge && Self.decide(407) == .challenge)
        #expect(Self.decide(304, revalidating: true) == .notModified)
        #expect(Self.decide(304) == .response, "a 304 to the caller's own conditional request is the response")
        #expect(Self.decide(503) == .serverError && Self.decide(503, firstRequest: false) == .response)
        #expect(Self.decide(200) == .response && Self.decide(404) == .response)
    }

    @Test("Redirects: the next request per RFC 9110 and the browsers; credentials never cross origins; no usable Location is the response")
    func redirects() {
        var post = Self.request(method: "POST")
        post.setValue("Bearer t", forHTTPHeaderField: "Authorization")
        post.setValue("a=1", forHTTPHeaderField: "Cookie")
        post.setValue("application/json", forHTTPHeaderField: "Content-Type")
        post.httpBody = Data("{}".utf8)
        guard case .redirect(let seeOther) = Self.decide(303, [("Location", "/b")], request: post) else { Issue.record("303 not followed"); return }
        #expect(seeOther.httpMethod == "GET" && seeOther.httpBody == nil && seeOther.value(forHTTPHeaderField: "Content-Type") == nil)
        #expect(seeOther.url?.absoluteString == "https://example.com/b" && seeOther.value(forHTTPHeaderField: "Authorization") == "Bearer t")
        guard case .redirect(let kept) = Self.decide(307, [("Location", "/c")], request: post) else { Issue.record("307 not followed"); return }
        #expect(kept.httpMethod == "POST" && kept.httpBody == Data("{}".utf8))
        guard case .redirect(let away) = Self.decide(302, [("location", "https://other.example/")], request: post) else { Issue.record("302 not followed"); return }
        #expect(away.value(forHTTPHeaderField: "Authorization") == nil && away.value(forHTTPHeaderField: "Cookie") == nil)
        guard case .redirect(let head) = Self.decide(303, [("Location", "/d")], request: Self.request(method: "HEAD")) else { Issue.record("303 HEAD"); return }
        #expect(head.httpMethod == "HEAD", "HEAD stays HEAD on a 303")
        #expect(Self.decide(302) == .response, "no Location")
        #expect(Self.decide(301, [("Location", "ftp://example.com/")]) == .response, "not http(s)")
        #expect(Self.decide(305, [("Location", "/e")]) == .response && Self.decide(306, [("Location", "/e")]) == .response)
    }
}

/// The `HTTPURLResponse` a head becomes (built with a look back
/// over the names for a usual head, by hashing for a long one).
@Suite struct ResponseObjectTests {
    static let url = URL(string: "https://example.com/a")!

    static func response(_ headers: [(name: String, value: String)]) throws -> HTTPURLResponse {
        try #require(SessionTask.makeResponse(url: url, head: ResponseHead(status: 200, httpVersion: "HTTP/1.1", headers: headers)))
    }

    @Test("RFC 9110 §5.3: lines of one name in any case become one value, in order, in a short head and in a long one")
    func repeatedNames() throws {
        let short = try Self.response([("Foo", "1"), ("foo", "2"), ("Bar", "x"), ("FOO", "3")])
        #expect(short.value(forHTTPHeaderField: "foo") == "1, 2, 3")
        #expect(short.value(forHTTPHeaderField: "bar") == "x")
        #expect(short.allHeaderFields.count == 2)
        var long: [(name: String, value: String)] = (0..<40).map { ("X-Field-\($0)", "\($0)") }
        long.insert(("Foo", "1"), at: 3)
        long.insert(("FOO", "2"), at: 20)
        long.append(("foo", "3"))
        let response = try Self.response(long)
        #expect(response.value(forHTTPHeaderField: "Foo") == "1, 2, 3")
        #expect(response.value(forHTTPHeaderField: "x-field-39") == "39")
        #expect(response.allHeaderFields.count == 41)
    }

    @Test("A head of 20,000 fields (a hostile server's) becomes a response with all of them, without work growing with their square")
    func hugeHead() throws {
        let response = try Self.response((0..<20_000).map { ("X-\($0)", "v") })
        #expect(response.allHeaderFields.count == 20_000)
    }
}
