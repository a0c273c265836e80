import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import URLLoading

/// Deciding on a hop's head from values alone (issue 39).
@Suite struct HeadDecisionTests {
    static func request(_ url: String = "https://example.com/a", method: String = "GET") -> URLRequest {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        return request
    }

    static func decide(_ status: Int, _ headers: [(name: String, value: String)] = [], request: URLRequest = request(), hop: Int = 0, revalidating: Bool = false)
        -> HeadDecision
    {
        HeadDecision.of(status: status, headers: headers, request: request, hop: hop, revalidating: revalidating)
    }

    @Test("SPEC S6 order: challenges, a revalidation's 304, a first request's 5xx, redirects, else the response")
    func order() {
        #expect(Self.decide(401) == .challenge && Self.decide(407) == .challenge)
        #expect(Self.decide(304, revalidating: true) == .notModified)
        #expect(Self.decide(304) == .response, "a 304 to the caller's own conditional request is the response")
        #expect(Self.decide(503) == .serverError && Self.decide(503, hop: 1) == .response)
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
