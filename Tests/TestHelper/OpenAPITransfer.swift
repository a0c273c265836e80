import Foundation
import Locking
import OpenAPIRuntime
import TestSupport
import URLLoading
import URLLoadingOpenAPI

// urlloading-test-helper openapi-transfer upload|download <base URL> <path> <bytes>
//     Sends (or receives) <bytes> of TestOrigin's pattern through
//     SessionTransport, never holding the body: the upload's body is
//     produced as the connection takes it, the download's checked chunk by
//     chunk. Prints one JSON line: status, bytes, consistent, and the peak
//     RSS before (after a small warm-up call) and after, in KiB.

func openAPITransfer(_ arguments: [String]) async -> Never {
    guard arguments.count == 4, ["upload", "download"].contains(arguments[0]), let base = URL(string: arguments[1]),
        let count = Int(arguments[3]), count >= 0
    else { fail("usage: openapi-transfer upload|download <base URL> <path> <bytes>") }
    let configuration = SessionConfiguration.ephemeral
    configuration.urlCache = nil
    let transport = SessionTransport(session: Session(configuration: configuration))
    do {
        // Loads what every call needs, so the baseline holds it.
        _ = try await transport.send(HTTPRequest(method: .get, scheme: nil, authority: nil, path: arguments[2]), body: nil, baseURL: base, operationID: "warmUp")
        let baseline = peakRSSKiB()
        let request = HTTPRequest(method: arguments[0] == "upload" ? .put : .get, scheme: nil, authority: nil, path: arguments[2])
        var body: HTTPBody?
        if arguments[0] == "upload" {
            let produced = Lock(0)
            let chunks = AsyncStream<ArraySlice<UInt8>> {
                guard
                    let (offset, length) = produced.withLock({ offset -> (Int, Int)? in
                        guard offset < count else { return nil }
                        let length = min(64 * 1024, count - offset)
                        offset += length
                        return (offset - length, length)
                    })
                else { return nil }
                return TestOrigin.pattern(offset: offset, count: length)[...]
            }
            body = HTTPBody(chunks, length: .known(Int64(count)))
        }
        let (response, responseBody) = try await transport.send(request, body: body, baseURL: base, operationID: "transfer")
        var received = 0
        var consistent = true
        if let responseBody {
            for try await chunk in responseBody {
                if arguments[0] == "download", !TestOrigin.isPattern(chunk, offset: received) { consistent = false }
                received += chunk.count
            }
        }
        let line: [String: Any] = [
            "status": response.status.code, "received": received, "consistent": consistent,
            "baselineKiB": baseline, "peakRSSKiB": peakRSSKiB(),
        ]
        let json = try JSONSerialization.data(withJSONObject: line, options: [.sortedKeys])
        print(String(decoding: json, as: UTF8.self))
    } catch {
        fail("\(error)")
    }
    exit(0)
}
