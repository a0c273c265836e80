import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import Transport
@testable import URLLoading

/// Planning a hop from values alone: no store, lock or socket.
@Suite struct HopPlanTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func request(_ url: String = "https://example.com/a", fields: [String: String] = [:], timeout: TimeInterval = 60) -> URLRequest {
        var request = URLRequest(url: URL(string: url)!, timeoutInterval: timeout)
        for (name, value) in fields { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    static func plan(_ request: URLRequest, deadline: Date? = nil, settings: SessionConfiguration.Values = .ephemeral) -> Result<TransferRequest, SessionError> {
        HopPlan.base(request, body: .none, settings: settings, deadline: deadline, now: now)
    }

    @Test("Refusals: a scheme other than http(s), CR/LF in the method, a deadline already passed; each with the failing URL")
    func refusals() {
        guard case .failure(let scheme) = Self.plan(Self.request("ftp://example.com/a")) else { Issue.record("ftp planned"); return }
        #expect(scheme.code == .unsupportedURL)
        var spaced = Self.request()
        spaced.httpMethod = "GET /other HTTP/1.1\r\nX:"
        guard case .failure(let crlf) = Self.plan(spaced) else { Issue.record("a method with CR/LF planned"); return }
        #expect(crlf.code == .badURL && crlf.failingURL?.host == "example.com")
        guard case .failure(let late) = Self.plan(Self.request(), deadline: Self.now) else { Issue.record("late hop planned"); return }
        #expect(late.code == .timedOut && late.failingURL?.host == "example.com")
    }

    @Test("Timeouts: the request's own interval or the configuration's per silence; what is left of the deadline in all")
    func timeouts() throws {
        var settings = SessionConfiguration.Values.ephemeral
        settings.timeoutIntervalForRequest = 30
        let plain = try Self.plan(Self.request(), deadline: Self.now.addingTimeInterval(2.5), settings: settings).get()
        #expect(plain.idleTimeout == .seconds(30) && plain.connectTimeout == .seconds(30))
        #expect(plain.totalTimeout == .milliseconds(2500))
        let own = try Self.plan(Self.request(timeout: 7), settings: settings).get()
        #expect(own.idleTimeout == .seconds(7) && own.totalTimeout == nil)
    }

    @Test("Fields: the session's own are left to the transport; the cookie, credentials and validators added; a request's field is never replaced by a validator")
    func fields() throws {
        var transfer = try Self.plan(
            Self.request(fields: ["Accept": "*/*", "Content-Length": "99", "If-None-Match": "\"mine\""])
        ).get()
        #expect(transfer.headers.map(\.name) == ["Accept", "If-None-Match"], "Content-Length is the transport's")
        HopPlan.complete(
            &transfer, cookie: "a=1", authorization: [("Authorization", "Basic dTpw")], libcurlAuthentication: nil,
            validators: [("If-None-Match", "\"stored\""), ("If-Modified-Since", "Sun, 06 Nov 1994 08:49:37 GMT")], isDownload: true)
        let sent = Dictionary(transfer.headers.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
        #expect(sent["Cookie"] == "a=1" && sent["Authorization"] == "Basic dTpw")
        #expect(sent["If-None-Match"] == "\"mine\"", "the caller's validator wins")
        #expect(sent["If-Modified-Since"] != nil)
        #expect(transfer.receiveBufferSize == SessionTask.downloadBufferSize)
    }

    @Test("Credentials chosen for a challenge replace a field of the same name, in any case")
    func authorizationReplaces() throws {
        var transfer = try Self.plan(Self.request(fields: ["authorization": "Bearer old"])).get()
        HopPlan.complete(&transfer, cookie: nil, authorization: [("Authorization", "Digest new")], libcurlAuthentication: nil, validators: [], isDownload: false)
        #expect(transfer.headers.filter { $0.name.lowercased() == "authorization" }.map(\.value) == ["Digest new"])
    }
}

/// What a caller that runs a transfer itself (transferd's downloads) is
/// given: the plan of a session with no part in the request, or nothing.
@Suite struct DirectTransferTests {
    /// A session of no store, as transferd makes them.
    static func bare(_ change: (SessionConfiguration) -> Void = { _ in }) -> Session {
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        configuration.urlCredentialStorage = nil
        configuration.proxiesFromEnvironment = false
        change(configuration)
        return Session(configuration: configuration)
    }

    @Test("A GET of a session with no store is planned as its task would send it, with the resource timeout from now")
    func planned() throws {
        let session = Self.bare { $0.timeoutIntervalForResource = 120 }
        defer { session.invalidateAndCancel() }
        let request = HopPlanTests.request("https://example.com/file", fields: ["Range": "bytes=10-", "If-Range": "\"v1\""], timeout: 15)
        let direct = try #require(session.directTransfer(for: request, now: HopPlanTests.now))
        #expect(direct.request.url == "https://example.com/file" && direct.request.method == "GET")
        #expect(direct.request.headers.map(\.name).sorted() == ["If-Range", "Range"])
        #expect(direct.request.idleTimeout == .seconds(15) && direct.request.totalTimeout == .seconds(120))
        #expect(direct.request.proxy == nil && direct.request.receiveBufferSize == SessionTask.downloadBufferSize)
    }

    @Test("Nothing when the session has a part: a store, a proxy for the URL, credentials in the URL, a method or body other than a plain GET")
    func refused() {
        let plain = HopPlanTests.request("http://example.com/file")
        let cookies = Self.bare { $0.httpCookieStorage = CookieStore() }
        let credentials = Self.bare { $0.urlCredentialStorage = CredentialStore() }
        let proxied = Self.bare { $0.proxyURL = URL(string: "http://127.0.0.1:3128") }
        let bare = Self.bare()
        defer { for session in [cookies, credentials, proxied, bare] { session.invalidateAndCancel() } }
        #expect(cookies.directTransfer(for: plain) == nil)
        #expect(credentials.directTransfer(for: plain) == nil)
        #expect(proxied.directTransfer(for: plain) == nil)
        #expect(bare.directTransfer(for: plain) != nil)
        #expect(bare.directTransfer(for: HopPlanTests.request("http://user:pw@example.com/file")) == nil)
        var post = plain
        post.httpMethod = "POST"
        #expect(bare.directTransfer(for: post) == nil)
        var withBody = plain
        withBody.httpBody = Data("x".utf8)
        #expect(bare.directTransfer(for: withBody) == nil)
        #expect(bare.directTransfer(for: HopPlanTests.request("ftp://example.com/file")) == nil)
    }
}
