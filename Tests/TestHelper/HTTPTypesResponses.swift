import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import URLLoading

// urlloading-test-helper http-types-responses <url>
//     GETs, POSTs, streams and downloads <url> through swift-http-types'
//     calls, then prints "built <n>": the Foundation responses the process
//     built (none are expected). Then one data(from:) and "built <n>" again.

func httpTypesResponses(_ arguments: [String]) async -> Never {
    guard arguments.count == 1, let url = URL(string: arguments[0]) else { fail("usage: http-types-responses <url>") }
    let session = Session(configuration: .ephemeral)
    let get = HTTPRequest(method: .get, url: url)
    do {
        _ = try await session.data(for: get)
        _ = try await session.upload(for: HTTPRequest(method: .post, url: url), from: Data("body".utf8))
        let (bytes, _) = try await session.bytes(for: get)
        for try await _ in bytes.lines {}
        let (file, _) = try await session.download(for: get)
        try? FileManager.default.removeItem(at: file)
        print("built \(SessionTask.responsesBuilt.load(ordering: .relaxed))")
        _ = try await session.data(from: url)
        print("built \(SessionTask.responsesBuilt.load(ordering: .relaxed))")
    } catch {
        fail("\(error)")
    }
    exit(0)
}
