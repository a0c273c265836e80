import Foundation

/// The keys of Apple's `connectionProxyDictionary` (CFNetwork's constants,
/// which Linux's Foundation lacks), so code that sets them compiles here.
public let kCFNetworkProxiesHTTPEnable = "HTTPEnable"
/// The HTTP proxy's host name or address.
public let kCFNetworkProxiesHTTPProxy = "HTTPProxy"
/// The HTTP proxy's port.
public let kCFNetworkProxiesHTTPPort = "HTTPPort"
/// Whether https URLs go through an HTTP proxy (by a `CONNECT` tunnel).
public let kCFNetworkProxiesHTTPSEnable = "HTTPSEnable"
/// That proxy's host name or address.
public let kCFNetworkProxiesHTTPSProxy = "HTTPSProxy"
/// That proxy's port.
public let kCFNetworkProxiesHTTPSPort = "HTTPSPort"
/// Whether a SOCKS proxy carries what no HTTP or HTTPS proxy carries.
public let kCFNetworkProxiesSOCKSEnable = "SOCKSEnable"
/// The SOCKS proxy's host name or address.
public let kCFNetworkProxiesSOCKSProxy = "SOCKSProxy"
/// The SOCKS proxy's port.
public let kCFNetworkProxiesSOCKSPort = "SOCKSPort"
/// Hosts reached directly: names (`*.example.com`, `example.com`),
/// addresses and CIDR ranges.
public let kCFNetworkProxiesExceptionsList = "ExceptionsList"

extension SessionConfiguration {
    /// A value of the proxy dictionary, kept in a form that may cross threads.
    enum ProxySetting: Sendable, Equatable {
        case flag(Bool)
        case number(Int)
        case text(String)
        case texts([String])

        init?(_ value: Any) {
            switch value {
            case let flag as Bool: self = .flag(flag)
            case let number as Int: self = .number(number)
            case let number as NSNumber: self = .number(number.intValue)
            case let text as String: self = .text(text)
            case let texts as [String]: self = .texts(texts)
            default: return nil
            }
        }

        var value: Any {
            switch self {
            case .flag(let flag): flag
            case .number(let number): number
            case .text(let text): text
            case .texts(let texts): texts
            }
        }
    }

    /// Apple's proxy settings: with the keys above, an HTTP proxy for http
    /// URLs, one for https URLs (a `CONNECT` tunnel) and a SOCKS proxy
    /// (SOCKS5, host names resolved by the proxy) for either without its
    /// own; `ExceptionsList` names the hosts reached directly. Set, it
    /// replaces the environment's proxies; `proxyURL` wins over both.
    /// Values of other types, and keys without a meaning here (automatic
    /// configuration scripts, FTP), are dropped. A proxy's port defaults
    /// to libcurl's (1080).
    public var connectionProxyDictionary: [AnyHashable: Any]? {
        get {
            value(\.proxyDictionary).map { settings in
                Dictionary(uniqueKeysWithValues: settings.map { (AnyHashable($0.key), $0.value.value) })
            }
        }
        set {
            update(
                \.proxyDictionary,
                newValue.map { dictionary in
                    var settings: [String: ProxySetting] = [:]
                    for (key, value) in dictionary {
                        guard let key = key.base as? String, let setting = ProxySetting(value) else { continue }
                        settings[key] = setting
                    }
                    return settings
                })
        }
    }
}

extension ProxyRules {
    /// The rules of Apple's proxy dictionary (see
    /// `SessionConfiguration.connectionProxyDictionary`).
    init(dictionary: [String: SessionConfiguration.ProxySetting]) {
        func enabled(_ key: String) -> Bool {
            switch dictionary[key] {
            case .flag(let flag)?: flag
            case .number(let number)?: number != 0
            case .text(let text)?: text == "1" || text.lowercased() == "true"
            default: false
            }
        }
        func proxy(_ enable: String, _ host: String, _ port: String, scheme: String) -> String? {
            guard enabled(enable), case .text(let name)? = dictionary[host] else { return nil }
            let trimmed = name.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, !trimmed.contains("/"), !trimmed.contains("@") else { return nil }
            let bracketed = trimmed.contains(":") && !trimmed.hasPrefix("[") ? "[\(trimmed)]" : trimmed
            let number: Int? =
                switch dictionary[port] {
                case .number(let number)?: number
                case .text(let text)?: Int(text)
                default: nil
                }
            guard let number, (1...65_535).contains(number) else { return "\(scheme)://\(bracketed)" }
            return "\(scheme)://\(bracketed):\(number)"
        }
        var exceptions: [Exception] = []
        if case .texts(let hosts)? = dictionary[kCFNetworkProxiesExceptionsList] {
            exceptions = Self.exceptions(hosts.joined(separator: ","))
        }
        self.init(
            http: proxy(kCFNetworkProxiesHTTPEnable, kCFNetworkProxiesHTTPProxy, kCFNetworkProxiesHTTPPort, scheme: "http"),
            https: proxy(kCFNetworkProxiesHTTPSEnable, kCFNetworkProxiesHTTPSProxy, kCFNetworkProxiesHTTPSPort, scheme: "http"),
            all: proxy(kCFNetworkProxiesSOCKSEnable, kCFNetworkProxiesSOCKSProxy, kCFNetworkProxiesSOCKSPort, scheme: "socks5h"),
            exceptions: exceptions)
    }
}
