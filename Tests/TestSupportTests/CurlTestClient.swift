import CCurl
import Foundation

/// A minimal libcurl client for testing the test origin itself, independent
/// of the library's Transport (which is tested against this origin).
///
/// `curl_easy_perform` blocks, so each request runs on a thread of its own:
/// blocking the few threads of Swift's cooperative pool would starve the
/// origin's handlers, which run there. One test uses one client at a time,
/// which is why the class may be sent to that thread.
final class CurlTestClient: @unchecked Sendable {
    struct Response: Sendable {
        var status: Int
        var headerLines: [String]
        var body: [UInt8]
        func header(_ name: String) -> String? {
            for line in headerLines {
                let parts = line.split(separator: ":", maxSplits: 1)
                if parts.count == 2, parts[0].lowercased() == name.lowercased() {
                    return parts[1].trimmingCharacters(in: .whitespacesAndNewlines)
                }
            }
            return nil
        }
    }

    struct Failure: Error, Sendable {
        var code: CURLcode
        var received: Response
    }

    private final class Sink {
        var headerLines: [String] = []
        var body: [UInt8] = []
    }

    private let handle: UnsafeMutableRawPointer

    init() {
        curl_global_init(Int(CURL_GLOBAL_ALL))
        // Allocation failure here means the test machine is out of memory.
        handle = curl_easy_init()!
    }

    deinit { curl_easy_cleanup(handle) }

    /// Performs one GET (or HEAD) on a thread of its own and returns what arrived.
    func get(_ url: URL, headers: [String] = [], caFile: String? = nil, head: Bool = false) async throws(Failure) -> Response {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Response, Failure>, Never>) in
            Thread.detachNewThread {
                continuation.resume(
                    returning: Result { () throws(Failure) -> Response in
                        try self.perform(url, headers: headers, caFile: caFile, head: head)
                    })
            }
        }
        return try result.get()
    }

    private func perform(_ url: URL, headers: [String], caFile: String?, head: Bool) throws(Failure) -> Response {
        let sink = Sink()
        var list: UnsafeMutablePointer<curl_slist>?
        for header in headers { list = curl_slist_append(list, header) }
        defer { curl_slist_free_all(list) }
        _ = urlloading_easy_setopt_string(handle, CURLOPT_URL, url.absoluteString)
        _ = urlloading_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, list)
        _ = urlloading_easy_setopt_long(handle, CURLOPT_NOBODY, head ? 1 : 0)
        if let caFile { _ = urlloading_easy_setopt_string(handle, CURLOPT_CAINFO, caFile) }
        let write: curl_write_callback = { data, size, count, user in
            let sink = Unmanaged<Sink>.fromOpaque(user!).takeUnretainedValue()
            let bytes = UnsafeRawBufferPointer(start: data, count: size * count)
            sink.body.append(contentsOf: bytes)
            return size * count
        }
        let header: curl_write_callback = { data, size, count, user in
            let sink = Unmanaged<Sink>.fromOpaque(user!).takeUnretainedValue()
            let bytes = UnsafeRawBufferPointer(start: data, count: size * count)
            sink.headerLines.append(String(decoding: bytes, as: UTF8.self))
            return size * count
        }
        let code: CURLcode = withExtendedLifetime(sink) {
            let box = Unmanaged.passUnretained(sink).toOpaque()
            _ = urlloading_easy_setopt_write_callback(handle, CURLOPT_WRITEFUNCTION, write)
            _ = urlloading_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, box)
            _ = urlloading_easy_setopt_write_callback(handle, CURLOPT_HEADERFUNCTION, header)
            _ = urlloading_easy_setopt_pointer(handle, CURLOPT_HEADERDATA, box)
            return curl_easy_perform(handle)
        }
        var status = 0
        _ = urlloading_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        let response = Response(status: status, headerLines: sink.headerLines, body: sink.body)
        guard code == CURLE_OK else { throw Failure(code: code, received: response) }
        return response
    }
}
