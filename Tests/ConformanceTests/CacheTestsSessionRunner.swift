import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import TestSupport
@testable import URLLoading

/// Runs http-tests/cache-tests through a real `Session` (ephemeral: its own
/// in-memory cache per test) against the loopback origin scripted to speak
/// the suite's protocol (its README): per-test config, `Req-Num`, date
/// deltas from the origin's now, 304/999 for validation, server counters,
/// recorded requests. `pause_after` waits are real time, so tests run many
/// at once.
struct CacheTestsSessionRunner {
    typealias Outcome = CacheTestsPolicyRunner.Outcome

    let origin: TestOrigin
    let cases: [String: CacheTestsPolicyRunner.TestCase]

    /// What the origin recorded for one test.
    final class ServerState: Sendable {
        struct Record: Sendable {
            var requestNumber: Int
            var method: String
            var headers: [HeaderField]
            var responseHeaders: [HeaderField]
        }
        let records = Lock<[Record]>([])
    }

    /// Registers the routes of one test on the origin and returns its state.
    func install(_ test: CacheTestsPolicyRunner.TestCase, base: String, uuid: String) -> ServerState {
        let state = ServerState()
        let configs = test.requests
        var paths = Set<String>()
        for config in configs {
            paths.insert(base + ((config["filename"] as? String).map { "/" + $0 } ?? ""))
        }
        let baseURL = origin.url(base).absoluteString
        for path in paths {
            origin.route(path) { request in
                Self.respond(request, configs: test.requests, state: state, uuid: uuid, baseURL: baseURL)
            }
        }
        return state
    }

    static func render(_ value: Any, now: Double, rfc850: Bool) -> String {
        if let delta = (value as? Int).map(Double.init) ?? (value as? Double) {
            let date = now + delta
            if rfc850 {
                let imf = HTTPDate.format(date)  // "Sun, 06 Nov 1994 08:49:37 GMT"
                let parts = imf.split(separator: " ")
                let days = ["Sun": "Sunday", "Mon": "Monday", "Tue": "Tuesday", "Wed": "Wednesday", "Thu": "Thursday", "Fri": "Friday", "Sat": "Saturday"]
                return "\(days[String(parts[0].dropLast())] ?? "Sunday"), \(parts[1])-\(parts[2])-\(parts[3].suffix(2)) \(parts[4]) GMT"
            }
            return HTTPDate.format(date)
        }
        return value as? String ?? "\(value)"
    }

    /// The origin side of the protocol.
    static func respond(_ request: RecordedRequest, configs: [[String: Any]], state: ServerState, uuid: String, baseURL: String) -> ScriptedResponse {
        let now = Date().timeIntervalSince1970.rounded(.down)
        let count = state.records.withLock { $0.count } + 1
        let number = request.header("Req-Num").flatMap(Int.init) ?? count
        guard number >= 1, number <= configs.count else { return ScriptedResponse(status: 400, body: "bad Req-Num") }
        let config = configs[number - 1]
        let rfc850 = Set(config["rfc850date"] as? [String] ?? [])
        var status = ((config["response_status"] as? [Any])?.first as? Int) ?? 200
        let reason = (config["response_status"] as? [Any]).flatMap { $0.count > 1 ? $0[1] as? String : nil }
        var headers: [HeaderField] = []
        for entry in config["response_headers"] as? [[Any]] ?? [] {
            guard let name = entry.first as? String, entry.count > 1 else { continue }
            var value = render(entry[1], now: now, rfc850: rfc850.contains(name))
            if config["magic_locations"] as? Bool == true, name == "Location" || name == "Content-Location" {
                value = baseURL + (value.isEmpty ? "" : "/" + value)
            }
            headers.append(HeaderField(name, value))
        }
        if let type = config["expected_type"] as? String, type.hasSuffix("_validated"), number >= 2 {
            let previous = configs[number - 2]
            func previousValue(_ field: String) -> String? {
                for entry in previous["response_headers"] as? [[Any]] ?? [] where (entry.first as? String)?.lowercased() == field.lowercased() && entry.count > 1 {
                    return render(entry[1], now: now, rfc850: false)
                }
                return nil
            }
            let inm = request.header("If-None-Match"), ims = request.header("If-Modified-Since")
            let etag = previousValue("ETag"), lastModified = previousValue("Last-Modified")
            if (inm != nil && inm == etag) || (ims != nil && lastModified != nil && ims == lastModified) {
                status = 304
            } else if type == "lm_validated", let ims, let lastModified,
                let a = HTTPDate.parse(ims), let b = HTTPDate.parse(lastModified), a == b
            {
                status = 304
            } else {
                status = 999
            }
        }
        let numbers = state.records.withLock { $0.map(\.requestNumber) } + [number]
        if !headers.contains(where: { $0.name.lowercased() == "date" }) { headers.append(HeaderField("Date", HTTPDate.format(now))) }
        if !headers.contains(where: { $0.name.lowercased() == "content-type" }) { headers.append(HeaderField("Content-Type", "text/plain")) }
        headers += [
            HeaderField("Server-Base-Url", baseURL), HeaderField("Server-Request-Count", "\(count)"),
            HeaderField("Client-Request-Count", "\(number)"),
            HeaderField("Server-Now", "\(Int(now * 1000))"),
            HeaderField("Request-Numbers", numbers.map(String.init).joined(separator: " ")),
        ]
        state.records.withLock {
            $0.append(.init(requestNumber: number, method: request.method, headers: request.headers, responseHeaders: headers))
        }
        var response: ScriptedResponse
        if config["disconnect"] as? Bool == true {
            response = ScriptedResponse(status: 200, parts: [.closeConnection], framing: .none)
            response.rawHead = []
            return response
        }
        let noBody = status == 204 || status == 304
        let body = noBody ? "" : ((config["response_body"] as? String) ?? uuid)
        response = ScriptedResponse(status: status, headers: headers, body: body)
        response.reason = reason
        if noBody { response.framing = .none; response.parts = [] }
        // A transfer coding other than chunked leaves the length to the
        // connection's close (RFC 9112 §6.3), as the suite's Node server frames it.
        if let coding = headers.last(where: { $0.name.lowercased() == "transfer-encoding" })?.value,
            coding.split(separator: ",").last?.trimmingCharacters(in: .whitespaces).lowercased() != "chunked", !noBody
        {
            response.framing = .closeDelimited
        }
        if let pause = config["response_pause"] as? Double { response.delayBeforeHead = .milliseconds(Int64(pause * 1000)) }
        if let pause = config["response_pause"] as? Int { response.delayBeforeHead = .seconds(pause) }
        return response
    }

    /// A delegate that refuses redirects (`redirect: manual`).
    final class NoRedirects: SessionDelegate {
        func urlSession(
            _ session: Session, task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
            newRequest request: URLRequest
        ) async -> URLRequest? { nil }
    }

    /// The client side: one test through a new ephemeral session.
    func run(_ test: CacheTestsPolicyRunner.TestCase) async -> Outcome {
        // The suite's default body is the test's uuid (36 characters; some
        // tests declare that Content-Length).
        let uuid = UUID().uuidString.lowercased()
        let base = "/test/\(uuid)"
        let state = install(test, base: base, uuid: uuid)
        let session = Session(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        var received: [Int: HTTPURLResponse] = [:]
        for (offset, config) in test.requests.enumerated() {
            let number = offset + 1
            let isSetup = config["setup"] as? Bool ?? false
            let setupTests = Set(config["setup_tests"] as? [String] ?? [])
            func failure(_ check: String, _ text: String) -> Outcome {
                isSetup || setupTests.contains(check) ? .setupFail("request \(number): \(text)") : .fail("request \(number): \(text)")
            }
            var path = base + ((config["filename"] as? String).map { "/" + $0 } ?? "")
            if let query = config["query_arg"] as? String { path += "?" + query }
            var request = URLRequest(url: origin.url(path))
            request.httpMethod = config["request_method"] as? String ?? "GET"
            if let body = config["request_body"] as? String { request.httpBody = Data(body.utf8) }
            request.setValue(test.id, forHTTPHeaderField: "Test-ID")
            request.setValue("\(number)", forHTTPHeaderField: "Req-Num")
            for pair in config["request_headers"] as? [[Any]] ?? [] {
                guard let name = pair.first as? String, pair.count > 1 else { continue }
                request.addValue(Self.render(pair[1], now: Date().timeIntervalSince1970.rounded(.down), rfc850: false), forHTTPHeaderField: name)
            }
            // fetch()'s "no-cache" mode revalidates by sending max-age=0, as browsers do.
            if config["cache"] as? String == "no-cache" { request.setValue("max-age=0", forHTTPHeaderField: "Cache-Control") }
            let delegate: (any SessionDelegate)? = config["redirect"] as? String == "manual" ? NoRedirects() : nil
            let response: HTTPURLResponse
            let body: Data
            do {
                let (data, received) = try await session.data(for: request, delegate: delegate)
                guard let http = received as? HTTPURLResponse else { return failure("response", "not HTTP") }
                response = http
                body = data
            } catch {
                if config["disconnect"] as? Bool == true { continue }
                return failure("response", "error \(error)")
            }
            // A number twice in Request-Numbers means the cache sent a request again.
            if let numbers = response.value(forHTTPHeaderField: "Request-Numbers")?.split(separator: " ").map(String.init),
                Set(numbers).count != numbers.count
            {
                return failure("request_numbers", "the cache retried: Request-Numbers \(numbers.joined(separator: " "))")
            }
            received[number] = response
            // The suite's own test: a response from the cache carries an
            // older Server-Request-Count (a background revalidation may
            // reach the origin meanwhile, so its request log cannot tell).
            let serverCount = response.value(forHTTPHeaderField: "Server-Request-Count").flatMap(Int.init) ?? 0
            switch config["expected_type"] as? String {
            case "cached":
                if serverCount >= number { return failure("expected_type", "expected a cached response, but the origin answered request \(number)") }
            case "not_cached":
                if serverCount != number { return failure("expected_type", "expected the origin to answer (Server-Request-Count \(serverCount), not \(number))") }
            case "lm_validated", "etag_validated":
                if response.statusCode == 999 { return failure("expected_type", "the request was not conditional (999)") }
            default: break
            }
            let expectedStatus = (config["expected_status"] as? Int) ?? ((config["response_status"] as? [Any])?.first as? Int) ?? 200
            if response.statusCode != expectedStatus, !(expectedStatus == 200 && (config["expected_type"] as? String)?.hasSuffix("validated") == true && response.statusCode == 200) {
                return failure("expected_status", "status \(response.statusCode), expected \(expectedStatus)")
            }
            for entry in config["expected_response_headers"] as? [Any] ?? [] {
                if let name = entry as? String {
                    if response.value(forHTTPHeaderField: name) == nil { return failure("expected_response_headers", "\(name) missing") }
                } else if let pair = entry as? [Any], let name = pair.first as? String {
                    let actual = response.value(forHTTPHeaderField: name)
                    if pair.count == 3, let op = pair[1] as? String {
                        if op == ">" {
                            let limit = (pair[2] as? Int) ?? 0
                            if (actual.flatMap(Int.init) ?? Int.min) <= limit { return failure("expected_response_headers", "\(name) \(actual ?? "absent") not > \(limit)") }
                        } else if op == "=", let other = pair[2] as? String, actual != response.value(forHTTPHeaderField: other) {
                            return failure("expected_response_headers", "\(name) differs from \(other)")
                        }
                    } else if pair.count > 1, pair[1] is Int {
                        // An integer is a date the origin rendered from its own clock
                        // (the suite's README): the value it last sent for this field.
                        let sent = state.records.withLock { records in
                            records.last { record in record.responseHeaders.contains { $0.name.lowercased() == name.lowercased() } }?
                                .responseHeaders.last { $0.name.lowercased() == name.lowercased() }?.value
                        }
                        if actual == nil || actual != sent {
                            return failure("expected_response_headers", "\(name) is \(actual ?? "absent"), not \(sent ?? "absent") as the origin sent it")
                        }
                    } else if pair.count > 1, actual != Self.render(pair[1], now: Date().timeIntervalSince1970, rfc850: false) {
                        return failure("expected_response_headers", "\(name) is \(actual ?? "absent"), not \(pair[1])")
                    }
                }
            }
            for name in config["expected_response_headers_missing"] as? [String] ?? [] where response.value(forHTTPHeaderField: name) != nil {
                return failure("expected_response_headers_missing", "\(name) present")
            }
            if config["check_body"] as? Bool != false, ![204, 304, 999].contains(response.statusCode), request.httpMethod != "HEAD" {
                let expected = (config["expected_response_text"] as? String) ?? (config["response_body"] as? String) ?? uuid
                if body != Data(expected.utf8) {
                    return failure("expected_response_text", "body \(String(decoding: body, as: UTF8.self).prefix(30)) not \(expected.prefix(30))")
                }
            }
            if config["pause_after"] as? Bool == true { try? await Task.sleep(for: .seconds(3)) }
        }
        // The origin's record of what it was sent.
        let records = state.records.withLock { $0 }
        for (offset, config) in test.requests.enumerated() where config["expected_type"] as? String != "cached" {
            let number = offset + 1
            guard let record = records.last(where: { $0.requestNumber == number }) else { continue }
            func header(_ name: String) -> String? { record.headers.first { $0.name.lowercased() == name.lowercased() }?.value }
            if let type = config["expected_type"] as? String, type.hasSuffix("_validated"),
                header("If-None-Match") == nil && header("If-Modified-Since") == nil
            {
                return .fail("request \(number): not conditional")
            }
            for pair in config["expected_request_headers"] as? [[Any]] ?? [] {
                guard let name = pair.first as? String, pair.count > 1, let value = pair[1] as? String else { continue }
                if header(name) != value { return .fail("request \(number): request header \(name) is \(header(name) ?? "absent"), not \(value)") }
            }
            for name in config["expected_request_headers_missing"] as? [String] ?? [] where header(name) != nil {
                return .fail("request \(number): request header \(name) present")
            }
            if let method = config["expected_method"] as? String, record.method != method {
                return .fail("request \(number): method \(record.method), not \(method)")
            }
            // The configured response fields the origin sent are what the
            // client received: Date aside, and those marked not to check.
            if let response = received[number] {
                var checked: Set<String> = []
                for entry in config["response_headers"] as? [[Any]] ?? [] {
                    guard let name = entry.first as? String, name.lowercased() != "date", !(entry.count > 2 && entry[2] as? Bool == false) else { continue }
                    checked.insert(name.lowercased())
                }
                var sent: [String: [String]] = [:]
                for field in record.responseHeaders where checked.contains(field.name.lowercased()) {
                    sent[field.name.lowercased(), default: []].append(field.value)
                }
                for (name, values) in sent where response.value(forHTTPHeaderField: name) != values.joined(separator: ", ") {
                    return .fail(
                        "request \(number): response header \(name) is \(response.value(forHTTPHeaderField: name) ?? "absent"), "
                            + "the origin sent \(values.joined(separator: ", "))")
                }
            }
        }
        return .pass
    }
}
