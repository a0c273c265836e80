import Foundation
@testable import URLLoading

/// Runs http-tests/cache-tests cases without a network: a small client that
/// does what the session does with the cache (look up, evaluate with
/// CachePolicy, serve / revalidate / fetch, merge 304s, store what is
/// storable) against an in-process origin that speaks the suite's protocol
/// (per-request config by `Req-Num`, date deltas from the origin's "now",
/// server request count, 304/999 for validation), on a simulated clock so
/// `pause_after` costs no real time.
///
/// The full suite runs through the session against a real origin in a later
/// issue; this runner covers the groups that need no network.
struct CacheTestsPolicyRunner {
    enum Outcome: Equatable {
        case pass
        case fail(String)
        case setupFail(String)
        case dependencyFailed
    }

    /// One test as parsed from the suite's JSON. `@unchecked Sendable`:
    /// the JSON values are read-only after parsing, and only read.
    struct TestCase: @unchecked Sendable {
        let id: String
        let kind: String
        let dependsOn: [String]
        let requests: [[String: Any]]
    }

    static let startTime = 1_800_000_000.0

    /// Loads the test cases of the suite file, by id.
    static func load(_ file: URL) throws -> (cases: [String: TestCase], suites: [String: [String]]) {
        let data = try Data(contentsOf: file)
        guard let suites = try JSONSerialization.jsonObject(with: data) as? [[String: Any]] else { return ([:], [:]) }
        var cases: [String: TestCase] = [:]
        var bySuite: [String: [String]] = [:]
        for suite in suites {
            let suiteID = suite["id"] as? String ?? ""
            for test in suite["tests"] as? [[String: Any]] ?? [] {
                guard let id = test["id"] as? String else { continue }
                cases[id] = TestCase(
                    id: id, kind: test["kind"] as? String ?? "required",
                    dependsOn: test["depends_on"] as? [String] ?? [],
                    requests: test["requests"] as? [[String: Any]] ?? [])
                bySuite[suiteID, default: []].append(id)
            }
        }
        return (cases, bySuite)
    }

    /// Runs `id` after its dependencies (memoised in `results`).
    static func run(_ id: String, cases: [String: TestCase], results: inout [String: Outcome]) -> Outcome {
        if let done = results[id] { return done }
        guard let test = cases[id] else { return .fail("unknown test") }
        for dependency in test.dependsOn where run(dependency, cases: cases, results: &results) != .pass {
            results[id] = .dependencyFailed
            return .dependencyFailed
        }
        let outcome = runOne(test)
        results[id] = outcome
        return outcome
    }

    private static func runOne(_ test: TestCase) -> Outcome {
        let cache = ResponseCache(memoryCapacity: 50 << 20)
        let url = "http://origin.test/test/\(test.id)"
        let key = CachePolicy.primaryKey(URL(string: url)!)!  // a literal URL
        var now = startTime
        var serverCount = 0
        var previousValidators: (etag: String?, lastModified: String?) = (nil, nil)

        for (offset, config) in test.requests.enumerated() {
            let number = offset + 1
            let isSetup = config["setup"] as? Bool ?? false
            func failure(_ text: String) -> Outcome {
                isSetup ? .setupFail("request \(number): \(text)") : .fail("request \(number): \(text)")
            }
            var requestHeaders = HeaderFields()
            for pair in config["request_headers"] as? [[Any]] ?? [] {
                requestHeaders.append(pair.first as? String ?? "", render(pair.count > 1 ? pair[1] : "", now: now))
            }
            requestHeaders.append("Req-Num", String(number))

            // The client: what the session does with the cache.
            var served: (status: Int, headers: HeaderFields, body: Data)
            var contacted = false
            let stored = cache.lookup(key: key, requestHeaders: requestHeaders)
            let evaluation = stored.map { CachePolicy.evaluate($0.entry, requestHeaders: requestHeaders, now: now) }
            if let stored, let evaluation, evaluation.action == .useStored || evaluation.action == .useStoredAndRevalidate {
                served = (stored.entry.status, CachePolicy.servedHeaders(stored.entry, now: now), (try? stored.wholeBody()) ?? Data())
            } else {
                var outgoing = requestHeaders
                if let stored, evaluation?.action == .revalidate {
                    for field in CachePolicy.conditionalHeaders(stored.entry) { outgoing.set(field.name, field.value) }
                }
                contacted = true
                serverCount += 1
                let response = originResponse(
                    test.requests, requestHeaders: outgoing, serverCount: serverCount,
                    previous: previousValidators, now: now, defaultBody: test.id)
                if response.status == 304, let stored,
                    CachePolicy.notModifiedSelects(stored.entry, notModifiedHeaders: response.headers).allowed
                {
                    var updated = stored
                    updated.entry.responseHeaders = CachePolicy.updatedHeaders(stored.entry.responseHeaders, with: response.headers)
                    updated.entry.requestTime = now
                    updated.entry.responseTime = now
                    cache.store(updated)
                    served = (updated.entry.status, updated.entry.responseHeaders, (try? updated.wholeBody()) ?? Data())
                } else {
                    if CachePolicy.storability(
                        method: "GET", requestHeaders: requestHeaders, status: response.status,
                        responseHeaders: response.headers
                    ).allowed {
                        cache.store(
                            StoredResponse(
                                url: url, key: key, status: response.status, responseHeaders: response.headers,
                                requestHeaders: requestHeaders, body: response.body, requestTime: now, responseTime: now, storedAt: now))
                    } else if let stored {
                        cache.remove(key: key, variant: stored.variant)
                    }
                    served = response
                }
                previousValidators = (response.headers["ETag"], response.headers["Last-Modified"])
            }

            // The suite's checks.
            switch config["expected_type"] as? String {
            case "cached" where contacted:
                return failure("expected a response from the cache, but the origin was asked (\(evaluation?.description ?? "nothing stored"))")
            case "not_cached" where !contacted:
                return failure("expected the origin to be asked, but the cache answered (\(evaluation?.description ?? ""))")
            case "lm_validated", "etag_validated":
                if !contacted || served.status == 999 {
                    return failure("expected a conditional request")
                }
            default: break
            }
            let expectedStatus = (config["expected_status"] as? Int) ?? ((config["response_status"] as? [Any])?.first as? Int) ?? 200
            if served.status != expectedStatus, !(served.status == 304 && expectedStatus == 200) {
                return failure("status \(served.status), expected \(expectedStatus)")
            }
            if config["check_body"] as? Bool != false, served.status != 204, served.status != 304 {
                let expected = (config["expected_response_text"] as? String) ?? (config["response_body"] as? String) ?? test.id
                if served.body != Data(expected.utf8) {
                    return failure("body \(String(decoding: served.body, as: UTF8.self).prefix(40)), expected \(expected.prefix(40))")
                }
            }
            if config["pause_after"] as? Bool == true { now += 3 }
        }
        return .pass
    }

    /// The origin of the suite's protocol.
    private static func originResponse(
        _ configs: [[String: Any]], requestHeaders: HeaderFields, serverCount: Int,
        previous: (etag: String?, lastModified: String?), now: Double, defaultBody: String
    ) -> (status: Int, headers: HeaderFields, body: Data) {
        let number = requestHeaders["Req-Num"].flatMap(Int.init) ?? serverCount
        guard number >= 1, number <= configs.count else { return (500, [], Data()) }
        let config = configs[number - 1]
        var status = ((config["response_status"] as? [Any])?.first as? Int) ?? 200
        var headers = HeaderFields()
        for entry in config["response_headers"] as? [[Any]] ?? [] {
            guard let name = entry.first as? String, entry.count > 1 else { continue }
            headers.append(name, render(entry[1], now: now))
        }
        if !headers.contains("Content-Type") { headers.append("Content-Type", "text/plain") }
        headers.append("Server-Request-Count", String(serverCount))
        if let type = config["expected_type"] as? String, type.hasSuffix("_validated") {
            let inm = requestHeaders["If-None-Match"], ims = requestHeaders["If-Modified-Since"]
            if (inm != nil && inm == previous.etag) || (ims != nil && ims == previous.lastModified) {
                status = 304
            } else {
                status = 999
            }
        }
        let body = status == 204 || status == 304 ? Data() : Data(((config["response_body"] as? String) ?? defaultBody).utf8)
        return (status, headers, body)
    }

    /// A header value: integers are date deltas from the origin's now.
    private static func render(_ value: Any, now: Double) -> String {
        if let delta = value as? Int { return HTTPDate.format(now + Double(delta)) }
        if let delta = value as? Double { return HTTPDate.format(now + delta) }
        return value as? String ?? "\(value)"
    }
}
