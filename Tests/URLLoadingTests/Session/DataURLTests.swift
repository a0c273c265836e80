import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// `data:` URLs (RFC 2397) load through the session's data, download and
/// async calls, as Apple's session loads them; malformed ones fail with
/// `badURL`.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct DataURLTests {
    @Test("RFC 2397: the default media type, percent-encoded and base64 data, parameters; the scheme in any case")
    func parsing() throws {
        let plain = try DataURL.parse("data:,A%20brief%20note").get()
        #expect(plain == DataURL(mediaType: "text/plain", charset: "US-ASCII", body: Data("A brief note".utf8)))
        let typed = try DataURL.parse("DATA:Text/HTML;charset=\"utf-8\",%3Cp%3E").get()
        #expect(typed.mediaType == "text/html" && typed.charset == "utf-8" && typed.body == Data("<p>".utf8))
        #expect(typed.contentType == "text/html;charset=utf-8")
        let image = try DataURL.parse("data:image/png;base64,AAEC/w==").get()
        #expect(image.mediaType == "image/png" && image.charset == nil && image.body == Data([0, 1, 2, 255]))
        // Padding left out, and whitespace (percent-encoded) inside, as browsers accept.
        #expect(try DataURL.parse("data:;base64,AAE%20C/w").get().body == Data([0, 1, 2, 255]))
        #expect(try DataURL.parse("data:;charset=utf-8,%C3%A9").get() == DataURL(mediaType: "text/plain", charset: "utf-8", body: Data("é".utf8)))
        #expect(try DataURL.parse("data:application/octet-stream,%00%FF").get().body == Data([0, 255]))
    }

    @Test("Malformed data: URLs are refused with a reason, never a trap")
    func malformed() {
        for text in [
            "data:text/plain", "data:text/plain,%zz", "data:text/plain,%4", "data:;base64,@@@@", "data:text/plain;base64,QQ===",
            "data:text plain,x", "data:text/plain;charset,x", "data:text/plain;=x,y", "data:te\u{1}xt/plain,x", "http:,x", "data",
            "data:a/b/c,x",
        ] {
            guard case .failure(let failure) = DataURL.parse(text) else {
                Issue.record("\(text) was accepted")
                continue
            }
            #expect(!failure.message.isEmpty)
        }
    }

    @Test("data(from:), a completion handler, a delegate and download(from:) load a data: URL; the response names its type and charset")
    func loads() async throws {
        let session = Session(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let url = try #require(URL(string: "data:text/plain;charset=utf-8,Hello%2C%20World"))
        let (data, response) = try await session.data(from: url)
        #expect(String(decoding: data, as: UTF8.self) == "Hello, World")
        #expect(response.url == url)
        #expect(response.mimeType == "text/plain")
        #expect(response.textEncodingName?.lowercased() == "utf-8")
        #expect(response.expectedContentLength == 12)
        let image = try #require(URL(string: "data:image/png;base64,AAEC/w=="))
        let (file, downloaded) = try await session.download(from: image)
        defer { try? FileManager.default.removeItem(at: file) }
        #expect(try Data(contentsOf: file) == Data([0, 1, 2, 255]))
        #expect(downloaded.mimeType == "image/png")
        let latch = CompletionLatch()
        let handled = HandlerResult()
        session.dataTask(with: url) { data, _, error in
            handled.set(data, error)
            latch.open()
        }.resume()
        await latch.wait()
        #expect(handled.text == "Hello, World" && handled.failed == false)
        let delegate = RecordingDelegate()
        let delegated = Session(configuration: .ephemeral, delegate: delegate, delegateQueue: nil)
        defer { delegated.finishTasksAndInvalidate() }
        delegated.dataTask(with: url).resume()
        await delegate.waitForCompletion()
        #expect(String(decoding: delegate.data, as: UTF8.self) == "Hello, World")
        #expect(delegate.events.first == "response 200" && delegate.events.last == "complete", "\(delegate.events)")
    }

    @Test("A malformed data: URL fails with badURL in every form of task")
    func malformedFailsWithBadURL() async throws {
        let session = Session(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let url = try #require(URL(string: "data:text/plain;base64,@@@@"))
        let dataError = await #expect(throws: URLError.self) { _ = try await session.data(from: url) }
        #expect(dataError?.code == .badURL)
        #expect(dataError?.failingURL == url)
        let downloadError = await #expect(throws: URLError.self) { _ = try await session.download(from: url) }
        #expect(downloadError?.code == .badURL)
    }

    final class HandlerResult: Sendable {
        private let state = Lock<(text: String?, failed: Bool?)>((nil, nil))
        func set(_ data: Data?, _ error: (any Error)?) {
            state.withLock { $0 = (data.map { String(decoding: $0, as: UTF8.self) }, error != nil) }
        }
        var text: String? { state.withLock { $0.text } }
        var failed: Bool? { state.withLock { $0.failed } }
    }
}
