import Foundation
import Transport

extension CachePolicy {
    /// What to do with a stored response for a new request.
    package enum Action: String, Sendable, Equatable {
        /// Serve it without contacting the origin.
        case useStored = "serve from cache"
        /// Serve it, and revalidate in the background (stale-while-revalidate, RFC 5861).
        case useStoredAndRevalidate = "serve stale from cache and revalidate in the background"
        /// Ask the origin, conditionally when the entry has validators.
        case revalidate = "revalidate with the origin"
        /// The entry does not apply to this request; go to the origin.
        case fetch = "fetch from the origin"
    }

    /// A decision about a stored response, with the figures behind it.
    package struct Evaluation: Sendable, Equatable, CustomStringConvertible {
        package var action: Action
        package var reason: String
        package var lifetime: Lifetime
        package var currentAge: Double

        /// Seconds of freshness left (negative when stale).
        package var freshnessRemaining: Double { lifetime.seconds - currentAge }
        package var isFresh: Bool { freshnessRemaining > 0 }

        package var description: String {
            "\(action.rawValue): \(reason) (lifetime \(Int(lifetime.seconds)) s from \(lifetime.source.rawValue), age \(Int(currentAge)) s)"
        }
    }

    /// The request's cache directives: its Cache-Control, or `Pragma:
    /// no-cache` when it has no Cache-Control (RFC 9111 §5.4).
    package static func requestControl(_ requestHeaders: HeaderFields) -> CacheControl {
        let lines = requestHeaders.values("Cache-Control")
        if lines.isEmpty, let pragma = requestHeaders.combined("Pragma"),
            CacheControl(pragma).has("no-cache")
        {
            return CacheControl("no-cache")
        }
        return CacheControl(lines)
    }

    /// Whether a stored response may answer a new request, must be
    /// revalidated, or does not apply (RFC 9111 §4, §4.2.4, §5.2; RFC 5861).
    package static func evaluate(_ entry: Entry, requestHeaders: HeaderFields, now: Double) -> Evaluation {
        let lifetime = freshnessLifetime(entry)
        let age = currentAge(entry, now: now)
        func result(_ action: Action, _ reason: String) -> Evaluation {
            Evaluation(action: action, reason: reason, lifetime: lifetime, currentAge: age)
        }
        let vary = varyMatches(entry, requestHeaders: requestHeaders)
        guard vary.allowed else { return result(.fetch, vary.reason + " (§4.1)") }

        let request = requestControl(requestHeaders)
        let response = CacheControl(entry.responseHeaders.values("Cache-Control"))
        if request.noCache { return result(.revalidate, "the request has no-cache (§5.2.1.4)") }
        if response.noCache { return result(.revalidate, "the stored response has no-cache (§5.2.2.4)") }
        // RFC 8246: an immutable response is not revalidated while fresh,
        // not even on a reload (which asks max-age=0).
        let immutableAndFresh = response.immutable && lifetime.seconds > age
        switch request.maxAge {
        case .valid(let limit) where age > Double(limit) && !immutableAndFresh:
            return result(.revalidate, "the request's max-age=\(limit) is less than the age (§5.2.1.1)")
        case .invalid:
            return result(.revalidate, "the request's max-age is invalid (§5.2.1.1)")
        default: break
        }
        switch request.minFresh {
        case .valid(let wanted) where lifetime.seconds - age < Double(wanted):
            return result(.revalidate, "the request's min-fresh=\(wanted) asks for more freshness than is left (§5.2.1.3)")
        default: break
        }
        if lifetime.seconds > age {
            return result(.useStored, "fresh (§4.2)")
        }
        let staleness = age - lifetime.seconds
        if response.mustRevalidate {
            return result(.revalidate, "stale, and the response has must-revalidate (§5.2.2.2)")
        }
        switch request.maxStale {
        case .unlimited:
            return result(.useStored, "stale, but the request accepts any staleness with max-stale (§5.2.1.2)")
        case .limit(let limit) where staleness <= Double(limit):
            return result(.useStored, "stale by \(Int(staleness)) s, within the request's max-stale=\(limit) (§5.2.1.2)")
        default: break
        }
        // The window ends at N seconds of staleness (exclusive, as OkHttp and
        // http-cache-semantics read RFC 5861's "up to N seconds").
        if case .valid(let window) = response.staleWhileRevalidate, staleness < Double(window) {
            return result(.useStoredAndRevalidate, "stale by \(Int(staleness)) s, within stale-while-revalidate=\(window) (RFC 5861 §3)")
        }
        return result(.revalidate, "stale by \(Int(staleness)) s (§4.2)")
    }

    /// Whether a stale stored response may be served because the origin
    /// failed (network error or 5xx), per `stale-if-error` of the response or
    /// the request (RFC 5861 §4).
    package static func staleIfError(_ entry: Entry, requestHeaders: HeaderFields, now: Double) -> Verdict {
        let response = CacheControl(entry.responseHeaders.values("Cache-Control"))
        if response.mustRevalidate || response.noCache {
            return .no("the stored response has \(response.mustRevalidate ? "must-revalidate" : "no-cache")")
        }
        let staleness = max(0, currentAge(entry, now: now) - freshnessLifetime(entry).seconds)
        for (control, whose) in [(requestControl(requestHeaders), "request's"), (response, "response's")] {
            if case .valid(let window) = control.staleIfError, staleness < Double(window) {
                return .yes("stale by \(Int(staleness)) s, within the \(whose) stale-if-error=\(window) (RFC 5861 §4)")
            }
        }
        return .no("no stale-if-error allows serving it stale by \(Int(staleness)) s")
    }

    /// The header fields that make the request for `entry` conditional
    /// (RFC 9111 §4.3.1): its entity tag and its Last-Modified.
    package static func conditionalHeaders(_ entry: Entry) -> HeaderFields {
        var fields = HeaderFields()
        if let etag = entry.responseHeaders.combined("ETag") { fields.append("If-None-Match", etag) }
        if let lastModified = entry.responseHeaders["Last-Modified"] { fields.append("If-Modified-Since", lastModified) }
        return fields
    }

    /// Fields that belong to one connection, never stored nor forwarded
    /// (RFC 9111 §3.1, RFC 9110 §7.6.1).
    package static let connectionFields: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade", "trailer",
    ]

    /// The lowercased field names a `Connection` field lists.
    static func namedByConnection(_ headers: HeaderFields) -> Set<String> {
        Set(
            FieldList.members(headers.values("Connection")).map { $0.lowercased() })
    }

    /// `headers` without the connection-specific fields and those the
    /// Connection field names (RFC 9111 §3.1).
    package static func removingConnectionFields(_ headers: HeaderFields) -> HeaderFields {
        let excluded = connectionFields.union(namedByConnection(headers))
        var result = headers
        result.removeAll { excluded.contains($0.name.lowercased()) }
        return result
    }

    /// The header fields of the request that revalidates `entry` for a new
    /// request (RFC 9111 §4.3.1): the new request's fields without
    /// connection fields and If-Range, its own If-None-Match extended by the
    /// stored entity tag, and the stored Last-Modified as If-Modified-Since
    /// unless the request brings its own. Weak validators are left out
    /// where they cannot be used: with If-Match, If-Unmodified-Since or
    /// Range (RFC 9110 §13.1).
    package static func revalidationHeaders(_ entry: Entry, requestHeaders: HeaderFields) -> HeaderFields {
        var headers = removingConnectionFields(requestHeaders)
        headers.remove("If-Range")
        let forbidsWeak = headers.contains("If-Match") || headers.contains("If-Unmodified-Since") || headers.contains("Range")
        var tags = FieldList.members(headers.values("If-None-Match"), quoted: true).map(String.init)
        if let etag = entry.responseHeaders["ETag"]?.trimmingCharacters(in: [" ", "\t"]), !tags.contains(etag) {
            tags.append(etag)
        }
        if forbidsWeak { tags.removeAll { $0.hasPrefix("W/") } }
        headers.remove("If-None-Match")
        if !tags.isEmpty { headers.append("If-None-Match", tags.joined(separator: ", ")) }
        if forbidsWeak {
            headers.remove("If-Modified-Since")
        } else if !headers.contains("If-Modified-Since"), let lastModified = entry.responseHeaders["Last-Modified"] {
            headers.append("If-Modified-Since", lastModified)
        }
        return headers
    }

    /// The header fields of a stored response served at `now`: `Age` set to
    /// its current age (RFC 9111 §5.1).
    package static func servedHeaders(_ entry: Entry, now: Double) -> HeaderFields {
        var headers = entry.responseHeaders
        headers.set("Age", String(Int(min(currentAge(entry, now: now), Double(CacheControl.maximumSeconds)))))
        return headers
    }
}
