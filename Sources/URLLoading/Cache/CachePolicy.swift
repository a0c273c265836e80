import Foundation
import Transport

/// The HTTP caching decisions of RFC 9111 for a private cache, as pure
/// functions of the request, the stored entry, the response and the time.
/// No I/O: `ResponseCache`, the session and `cachetool explain` call these.
///
/// Every decision carries a reason a person can read.
package enum CachePolicy {
    /// A yes/no decision and why.
    package struct Verdict: Sendable, Equatable, CustomStringConvertible {
        package let allowed: Bool
        package let reason: String

        package static func yes(_ reason: String) -> Verdict { Verdict(allowed: true, reason: reason) }
        package static func no(_ reason: String) -> Verdict { Verdict(allowed: false, reason: reason) }
        package var description: String { (allowed ? "yes: " : "no: ") + reason }
    }

    /// What a stored entry is, for the decisions: the response as stored and
    /// the request that produced it, with the times of RFC 9111 §4.2.3.
    package struct Entry: Sendable, Equatable {
        package var status: Int
        package var responseHeaders: HeaderFields
        /// The request's header fields (Vary selects among them).
        package var requestHeaders: HeaderFields
        /// When the request was sent (seconds since 1970).
        package var requestTime: Double
        /// When the response was received (seconds since 1970).
        package var responseTime: Double

        package init(status: Int, responseHeaders: HeaderFields, requestHeaders: HeaderFields, requestTime: Double, responseTime: Double) {
            self.status = status
            self.responseHeaders = responseHeaders
            self.requestHeaders = requestHeaders
            self.requestTime = requestTime
            self.responseTime = responseTime
        }
    }

    /// Status codes a cache may store by heuristics alone (RFC 9110 §15.1).
    package static let heuristicallyCacheable: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

    /// Status codes whose semantics this cache understands (for
    /// `must-understand`, RFC 9111 §5.2.2.3).
    package static let understoodStatuses: Set<Int> = [200, 203, 204, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 501]

    /// Methods that never invalidate (RFC 9110 §9.2.1 safe methods).
    package static let safeMethods: Set<String> = ["GET", "HEAD", "OPTIONS", "TRACE"]

    // MARK: Storing (RFC 9111 §3)

    /// Whether a response may be stored by a private cache (RFC 9111 §3),
    /// apart from the configuration's policies and the size rule, which
    /// `ResponseCache` applies.
    package static func storability(
        method: String, requestHeaders: HeaderFields, status: Int, responseHeaders: HeaderFields
    ) -> Verdict {
        guard method == "GET" else {
            return .no("the request method is \(method); only GET responses are stored (§3)")
        }
        guard status >= 200 else { return .no("status \(status) is not a final response (§3)") }
        if status == 206 { return .no("partial content (206) is not stored: this cache does not combine ranges (§3.3)") }
        if status == 304 { return .no("a 304 updates a stored response; it is not stored itself (§4.3.4)") }
        let requestControl = CacheControl(requestHeaders.values("Cache-Control"))
        if requestControl.noStore { return .no("the request has Cache-Control: no-store (§5.2.1.5)") }
        let control = CacheControl(responseHeaders.values("Cache-Control"))
        if control.mustUnderstand {
            guard understoodStatuses.contains(status) else {
                return .no("must-understand with status \(status), whose caching rules this cache does not know (§5.2.2.3)")
            }
        } else if control.noStore {
            return .no("the response has Cache-Control: no-store (§5.2.2.5)")
        }
        guard let varyNames = varyFields(responseHeaders) else {
            return .no("Vary: * never matches a later request (§4.1)")
        }
        if varyNames.count > maximumVaryFields {
            return .no("Vary names \(varyNames.count) fields, more than this cache compares (\(maximumVaryFields))")
        }
        if control.maxAge != .absent { return .yes("explicit freshness: max-age (§5.2.2.1)") }
        if responseHeaders.contains("Expires") { return .yes("explicit freshness: Expires (§5.3)") }
        if control.isPrivate { return .yes("Cache-Control: private allows a private cache to store it (§5.2.2.7)") }
        if control.isPublic { return .yes("Cache-Control: public allows storing (§5.2.2.9)") }
        if heuristicallyCacheable.contains(status) {
            return .yes("status \(status) is heuristically cacheable (§4.2.2)")
        }
        return .no("status \(status) needs explicit freshness (max-age or Expires) to be stored (§3)")
    }

    // MARK: Freshness (RFC 9111 §4.2)

    /// Where a freshness lifetime came from.
    package enum FreshnessSource: String, Sendable, Equatable {
        case maxAge = "max-age"
        case expires = "Expires"
        case heuristic = "heuristic (10% of the time since Last-Modified)"
        case invalid = "invalid freshness information"
        case none = "no freshness information"
    }

    /// A freshness lifetime in seconds and its source.
    package struct Lifetime: Sendable, Equatable {
        package var seconds: Double
        package var source: FreshnessSource
    }

    /// The freshness lifetime of a stored response (RFC 9111 §4.2.1).
    /// `s-maxage` is ignored: this is a private cache.
    package static func freshnessLifetime(_ entry: Entry) -> Lifetime {
        let headers = entry.responseHeaders
        let control = CacheControl(headers.values("Cache-Control"))
        switch control.maxAge {
        case .valid(let seconds): return Lifetime(seconds: Double(seconds), source: .maxAge)
        case .invalid: return Lifetime(seconds: 0, source: .invalid)
        case .absent: break
        }
        let dateValue = self.dateValue(entry)
        let expiresLines = headers.values("Expires")
        if !expiresLines.isEmpty {
            // Several lines, or an invalid date, mean "already expired" (§5.3).
            guard expiresLines.count == 1, let expires = HTTPDate.parse(expiresLines[0], now: entry.responseTime) else {
                return Lifetime(seconds: 0, source: .invalid)
            }
            return Lifetime(seconds: max(0, expires - dateValue), source: .expires)
        }
        if heuristicallyCacheable.contains(entry.status) || control.isPublic,
            let lastModifiedText = headers["Last-Modified"],
            let lastModified = HTTPDate.parse(lastModifiedText, now: entry.responseTime),
            lastModified < dateValue
        {
            return Lifetime(seconds: ((dateValue - lastModified) * 0.1).rounded(.down), source: .heuristic)
        }
        return Lifetime(seconds: 0, source: .none)
    }

    /// The Date of the response, or the time it was received when it has
    /// none or an invalid one (RFC 9110 §6.6.1).
    package static func dateValue(_ entry: Entry) -> Double {
        entry.responseHeaders["Date"].flatMap { HTTPDate.parse($0, now: entry.responseTime) } ?? entry.responseTime
    }

    /// The `Age` value (RFC 9111 §5.1): the first member of the first line,
    /// a non-negative integer (parameters after `;` ignored), clamped to 2^31;
    /// anything else is ignored (nil).
    package static func ageValue(_ headers: HeaderFields) -> Double? {
        guard let line = headers.values("Age").first else { return nil }
        let first = FieldList.first(line) ?? ""
        let member = first.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let text = member.trimmingCharacters(in: [" ", "\t"])
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        if case .valid(let value) = CacheControl.deltaSeconds(text) { return Double(value) }
        return nil
    }

    /// The current age of a stored response at `now` (RFC 9111 §4.2.3).
    package static func currentAge(_ entry: Entry, now: Double) -> Double {
        let apparentAge = max(0, entry.responseTime - dateValue(entry))
        let responseDelay = max(0, entry.responseTime - entry.requestTime)
        let correctedAgeValue = (ageValue(entry.responseHeaders) ?? 0) + responseDelay
        let correctedInitialAge = max(apparentAge, correctedAgeValue)
        let residentTime = max(0, now - entry.responseTime)
        return correctedInitialAge + residentTime
    }

    // MARK: Vary (RFC 9111 §4.1)

    /// The most field names a storable response's Vary may name. Real
    /// responses name a handful; each name costs a comparison on every
    /// lookup, so a response naming thousands is not stored.
    package static let maximumVaryFields = 64

    /// The lowercased field names of the response's Vary, in order and
    /// without repeats, or nil for `*`. Linear in the field's length.
    package static func varyFields(_ responseHeaders: HeaderFields) -> [String]? {
        var names: [String] = []
        var seen: Set<String> = []
        for member in FieldList.members(responseHeaders.values("Vary")) {
            let name = member.lowercased()
            if name == "*" { return nil }
            if seen.insert(name).inserted { names.append(name) }
        }
        return names
    }

    /// A request field's value as Vary compares it: lines combined, the
    /// whitespace around commas and empty members removed (RFC 9110
    /// §5.6.1: `a,,b` lists what `a, b` does); nil when absent.
    package static func normalizedValue(_ name: String, in headers: HeaderFields) -> String? {
        let values = headers.values(name)
        guard !values.isEmpty else { return nil }
        var members = FieldList.members(values).map(String.init)
        // Language ranges are case-insensitive and their order carries no
        // meaning beside their q-values (RFC 9110 §12.5.4), so requests that
        // differ only so select the same variant.
        if HeaderFields.namesEqual(name, "Accept-Language") {
            members = members.map { $0.lowercased().replacingOccurrences(of: " ", with: "") }.sorted()
        }
        return members.joined(separator: ",")
    }

    /// The secondary cache key: the request's normalized values of the
    /// response's Vary fields (empty when there is no Vary).
    package static func secondaryKey(responseHeaders: HeaderFields, requestHeaders: HeaderFields) -> String {
        var names = varyFields(responseHeaders) ?? []
        // The request's credentials select as if the response varied on them.
        if requestHeaders.contains(StoredResponse.credentialsField), !names.contains(StoredResponse.credentialsField) {
            names.append(StoredResponse.credentialsField)
        }
        guard !names.isEmpty else { return "" }
        return names.map { name in
            "\(name)=" + (normalizedValue(name, in: requestHeaders).map { "\"\($0)\"" } ?? "-")
        }.joined(separator: "\n")
    }

    /// Whether a new request selects the stored response (RFC 9111 §4.1).
    package static func varyMatches(_ entry: Entry, requestHeaders: HeaderFields) -> Verdict {
        guard var names = varyFields(entry.responseHeaders) else {
            return .no("the stored response has Vary: *")
        }
        // A response stored for credentials serves only the same
        // credentials, whatever Vary says (see `StoredResponse.credentialsField`);
        // one stored without any is nobody's and may serve anybody.
        if !names.contains(StoredResponse.credentialsField), entry.requestHeaders.contains(StoredResponse.credentialsField) {
            names.append(StoredResponse.credentialsField)
        }
        var fingerprinted: HeaderFields?
        for name in names {
            let stored = normalizedValue(name, in: entry.requestHeaders)
            if normalizedValue(name, in: requestHeaders) == stored { continue }
            // A stored entry keeps secret fields (Cookie, Authorization) only as fingerprints.
            if StoredResponse.secretRequestFields.contains(name) {
                if fingerprinted == nil { fingerprinted = StoredResponse.comparableRequestHeaders(requestHeaders) }
                if let fingerprinted, normalizedValue(name, in: fingerprinted) == stored { continue }
            }
            return .no("Vary: the request's \(name) differs from the stored request's")
        }
        return .yes(names.isEmpty ? "no Vary" : "Vary fields match: \(names.joined(separator: ", "))")
    }
}
