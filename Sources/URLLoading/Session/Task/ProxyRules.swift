import Foundation
import Streams

/// Which proxy a request goes through, from Apple's proxy dictionary
/// (`SessionConfiguration.connectionProxyDictionary`) or, by default, from
/// the proxies the environment names, with curl's rules (and Python's
/// requests', which follow them): `http_proxy` for http URLs in lower case
/// only — an upper-case `HTTP_PROXY` can be set by a CGI request's `Proxy:`
/// field ("httpoxy") —, `https_proxy` or `HTTPS_PROXY` for https URLs,
/// `all_proxy` or `ALL_PROXY` for either when its own is not set (lower
/// case first; an empty value is no value). `no_proxy` (or `NO_PROXY`)
/// lists the hosts reached directly: `*` for all, names matched as
/// themselves and as suffixes at a dot (`example.com` and `.example.com`
/// both cover `www.example.com`), IP addresses and CIDR ranges
/// (`10.0.0.0/8`, `fd00::/8`). A value without a scheme is an http proxy,
/// as curl takes it. Pure: made once when a session is made, and carried
/// to transferd with each background task, so that its transfers take the
/// proxies the app's configuration chose.
package struct ProxyRules: Sendable, Hashable, Codable {
    /// One entry of `no_proxy`.
    package enum Exception: Sendable, Hashable, Codable {
        case everything
        /// A host name, lower case, without leading or trailing dots.
        case name(String)
        /// An address (4 or 16 bytes) and how many leading bits must match.
        case network([UInt8], prefixLength: Int)
    }

    /// The proxy for http URLs, as libcurl takes it (perhaps with credentials: never log it).
    package var http: String?
    /// The proxy for https URLs.
    package var https: String?
    /// The proxy for either, when its own is not set.
    package var all: String?
    /// The hosts reached directly.
    package var exceptions: [Exception] = []

    /// Nothing set: every request goes directly.
    var isEmpty: Bool { http == nil && https == nil && all == nil }

    package init(http: String? = nil, https: String? = nil, all: String? = nil, exceptions: [Exception] = []) {
        self.http = http
        self.https = https
        self.all = all
        self.exceptions = exceptions
    }

    /// The proxies `environment` names (a process's, as
    /// `ProcessInfo.processInfo.environment`).
    init(environment: [String: String]) {
        func value(_ names: String...) -> String? {
            for name in names {
                if let value = environment[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty { return value }
            }
            return nil
        }
        http = value("http_proxy")
        https = value("https_proxy", "HTTPS_PROXY")
        all = value("all_proxy", "ALL_PROXY")
        exceptions = Self.exceptions(value("no_proxy", "NO_PROXY") ?? "")
    }

    /// The proxy for `url` (as libcurl takes it: a URL, perhaps without a
    /// scheme), or nil to go directly.
    func proxy(for url: URL) -> String? {
        guard !isEmpty, let scheme = url.scheme?.lowercased(), let host = url.host(percentEncoded: false), !host.isEmpty else { return nil }
        let chosen: String?
        switch scheme {
        case "http": chosen = http ?? all
        case "https": chosen = https ?? all
        default: chosen = nil
        }
        guard let chosen, !bypasses(host) else { return nil }
        return chosen
    }

    /// A proxy as a URL (one without a scheme is an http proxy, as libcurl
    /// takes it), for its protection space and remembered credentials.
    static func url(of proxy: String) -> URL? {
        URL(string: proxy.contains("://") ? proxy : "http://" + proxy)
    }

    /// Whether `host` (a name, or an address with or without brackets) is
    /// reached directly.
    func bypasses(_ host: String) -> Bool {
        guard !exceptions.isEmpty else { return false }
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        while name.hasSuffix(".") { name.removeLast() }
        let address = Self.address(name)
        for exception in exceptions {
            switch exception {
            case .everything:
                return true
            case .name(let suffix):
                if address == nil, name == suffix || name.hasSuffix("." + suffix) { return true }
            case .network(let network, let prefixLength):
                if let address, address.count == network.count, Self.matches(address, network, prefixLength) { return true }
            }
        }
        return false
    }

    /// `no_proxy`'s entries: separated by commas, spaces or tabs; an entry
    /// that is neither `*`, a name nor an address or range is left out.
    static func exceptions(_ list: String) -> [Exception] {
        var exceptions: [Exception] = []
        for part in list.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }) {
            var entry = part.lowercased()
            if entry == "*" {
                exceptions.append(.everything)
                continue
            }
            if entry.hasPrefix("["), let close = entry.firstIndex(of: "]") {
                entry = String(entry[entry.index(after: entry.startIndex)..<close]) + entry[entry.index(after: close)...]
            }
            let pieces = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            if let address = address(String(pieces[0])) {
                let bits = address.count * 8
                if pieces.count == 2 {
                    guard let length = Int(pieces[1]), (0...bits).contains(length) else { continue }
                    exceptions.append(.network(address, prefixLength: length))
                } else {
                    exceptions.append(.network(address, prefixLength: bits))
                }
                continue
            }
            if entry.hasPrefix("*.") { entry.removeFirst() }  // Apple's form of a suffix
            while entry.hasPrefix(".") { entry.removeFirst() }
            while entry.hasSuffix(".") { entry.removeLast() }
            guard !entry.isEmpty, !entry.contains("/") else { continue }
            exceptions.append(.name(entry))
        }
        return exceptions
    }

    /// The bytes of an IPv4 or IPv6 address written as text, or nil.
    static func address(_ text: String) -> [UInt8]? { StreamSocketAddress.bytes(text) }

    private static func matches(_ address: [UInt8], _ network: [UInt8], _ prefixLength: Int) -> Bool {
        var left = prefixLength
        for index in address.indices where left > 0 {
            let bits = min(8, left)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
            if address[index] & mask != network[index] & mask { return false }
            left -= bits
        }
        return true
    }
}
