import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension SessionConfiguration.Values {
    /// Decides the rules for choosing a proxy, once, for a session being
    /// made: none with `proxyURL` (it carries everything), else Apple's
    /// dictionary's when set, else the environment's.
    mutating func resolveProxies() {
        guard proxyURL == nil else { return }
        let rules: ProxyRules
        if let presetProxyRules {
            rules = presetProxyRules
        } else if let proxyDictionary {
            rules = ProxyRules(dictionary: proxyDictionary)
        } else if proxiesFromEnvironment {
            rules = ProxyRules(environment: proxyEnvironmentSource ?? ProcessInfo.processInfo.environment)
        } else {
            return
        }
        proxyRules = rules.isEmpty ? nil : rules
    }

    /// The proxy a request to `url` goes through, as libcurl takes it
    /// (perhaps with credentials: never log it); nil to go directly.
    func proxy(for url: URL) -> String? {
        proxyURL?.absoluteString ?? proxyRules?.proxy(for: url)
    }

    /// The proxies the session chose, as rules another process can apply
    /// (a background session's transferd): `proxyURL` as the proxy for
    /// every request, else the dictionary's or the environment's; nil for
    /// none. Read after `resolveProxies()`.
    var chosenProxies: ProxyRules? {
        if let proxyURL { return ProxyRules(all: proxyURL.absoluteString) }
        return proxyRules
    }

    /// That proxy as a URL, for its protection space and credentials.
    func proxyAsURL(for url: URL) -> URL? {
        proxyURL ?? proxyRules?.proxy(for: url).flatMap(ProxyRules.url(of:))
    }
}

extension SessionConfiguration {
    /// The settings themselves, as a value: what a session copies when it is
    /// made, and how each store is chosen and opened.
    struct Values: Sendable {
        /// Where a session's store (cache, cookies) comes from.
        enum StoreChoice<Store: Sendable>: Sendable {
            /// The application's shared persistent store (default configurations).
            case applicationShared
            /// An ephemeral configuration's own in-memory store, which the
            /// sessions made from it use and empty when invalidated (as
            /// Apple's: `configuration.httpCookieStorage` shows what the
            /// session stored); another ephemeral configuration has others.
            case ephemeral(Store)
            /// This store object, shared by every session given it.
            case explicit(Store)
            /// No store.
            case none
        }

        /// The kind.
        let kind: SessionConfiguration.Kind

        /// Names the application's stores under the XDG directories; by default
        /// the executable's name.
        var applicationIdentifier: String = StoreLocations.defaultApplicationIdentifier

        /// The cache policy of requests that use `.useProtocolCachePolicy`.
        var requestCachePolicy: URLRequest.CachePolicy = .useProtocolCachePolicy
        /// Seconds without any byte moving before a request fails (Apple: 60).
        var timeoutIntervalForRequest: TimeInterval = 60
        /// Seconds a whole task may take (Apple: 7 days).
        var timeoutIntervalForResource: TimeInterval = 7 * 24 * 3600
        /// Connections libcurl may open to one host (Apple: 6).
        var httpMaximumConnectionsPerHost = 6
        /// Redirects a task follows before failing with `.httpTooManyRedirects`
        /// (Apple's limit is 16).
        var httpMaximumRedirects = 16
        /// Transport loops (threads running libcurl) of the session.
        var transportLoops = SessionConfiguration.defaultTransportLoops
        /// Whether those loops spin for the next event (`CurlMulti`).
        var transportSpins = true
        /// Whether the request timeout counts from the request's sending
        /// (`TransferRequest.idleTimeoutCountsFromSend`).
        var requestTimeoutCountsFromSend = false
        /// Whether requests get cookies from the cookie store and responses'
        /// `Set-Cookie` fields go into it (per request, `URLRequest.httpShouldHandleCookies`
        /// must allow it too).
        var httpShouldSetCookies = true
        /// Which cookies responses may set (Apple's default: only from the main
        /// document's domain, which admits every response of a request without
        /// a `mainDocumentURL`).
        var httpCookieAcceptPolicy: CookieAcceptPolicy = .onlyFromMainDocumentDomain
        /// Header fields added to every request that does not set them itself.
        var httpAdditionalHeaders: [String: String] = [:]
        /// Whether a task waits for connectivity instead of failing at once.
        var waitsForConnectivity = false
        /// Background sessions: transferd runs `launchCommand` when events wait and no session is attached.
        var sessionSendsLaunchEvents = true
        /// Background sessions: the command transferd runs for launch events; nil launches nothing.
        var launchCommand: [String]?
        /// Background sessions: tasks run after the others.
        var isDiscretionary = false
        /// Apple's members that a port needs and Linux has no use for (see
        /// `SessionConfiguration+Apple.swift`): kept and copied, never read.
        var platform = PlatformSettings()
        /// A proxy for every request, as `http://host:port`; nil for none.
        var proxyURL: URL?
        /// The `session` dimension of the session's metrics.
        var metricsLabel: String?
        /// A Unix-domain socket every http and https request connects to.
        var unixSocketPath: String?
        /// Whether requests take the proxies the environment names when
        /// `proxyURL` is nil (see `ProxyRules`).
        var proxiesFromEnvironment = true
        /// The environment those come from: nil for the process's, read
        /// when a session is made; tests give their own.
        var proxyEnvironmentSource: [String: String]?
        /// Rules decided in another process (a background session's, for
        /// transferd): they win over the dictionary and the environment.
        var presetProxyRules: ProxyRules?
        /// Apple's `connectionProxyDictionary`, its values kept as `ProxySetting`s.
        var proxyDictionary: [String: SessionConfiguration.ProxySetting]?
        /// What the dictionary or the environment names, set by
        /// `resolveProxies()` when a session is made; nil when neither names a proxy.
        var proxyRules: ProxyRules?
        /// The lowest and highest TLS versions to negotiate, e.g. `(1, 2)`.
        var tlsMinimumSupportedVersion: (major: Int, minor: Int)?
        var tlsMaximumSupportedVersion: (major: Int, minor: Int)?
        /// A PEM file of trust roots to verify servers against instead of the
        /// system's (custom roots).
        var trustRootsFile: String?
        /// Interceptors, consulted in order before the network (the role of
        /// Apple's `protocolClasses`).
        var interceptors: [any Interceptor] = []
        /// Foundation `URLProtocol` classes that load requests, in order.
        var protocolClasses: [URLProtocol.Type] = []
        /// Whether responses carry an RFC 9211 `Cache-Status` field.
        var sendsCacheStatus = true
        /// The resumable uploads' interop version upload tasks announce; nil for none.
        var resumableUploadVersion: Int? = ResumableUpload.Version.v6.rawValue

        var cacheChoice: StoreChoice<ResponseCache>
        var cookieChoice: StoreChoice<CookieStore>
        var credentialChoice: StoreChoice<CredentialStore>

        /// The response cache. Default configurations use the application's
        /// shared persistent cache; ephemeral ones an in-memory cache of their
        /// own, which their sessions use.
        /// Setting a cache makes every session from this configuration share it;
        /// setting nil turns caching off.
        var urlCache: ResponseCache? {
            get {
                switch cacheChoice {
                case .explicit(let cache), .ephemeral(let cache): return cache
                case .applicationShared: return SharedStores.cache(for: applicationIdentifier)
                case .none: return nil
                }
            }
            set { cacheChoice = newValue.map { .explicit($0) } ?? .none }
        }

        /// The cookie store. Default configurations use the application's
        /// shared persistent store (`Cookies.sqlite` under `$XDG_DATA_HOME/<app>/`);
        /// ephemeral ones have an in-memory store of
        /// their own, which their sessions use. Setting a store makes every
        /// session from this configuration share it; setting nil turns cookies off.
        var httpCookieStorage: CookieStore? {
            get {
                switch cookieChoice {
                case .explicit(let store), .ephemeral(let store): return store
                case .applicationShared: return SharedStores.cookieStore(for: applicationIdentifier)
                case .none: return nil
                }
            }
            set { cookieChoice = newValue.map { .explicit($0) } ?? .none }
        }

        init(kind: SessionConfiguration.Kind, shared: Bool) {
            self.kind = kind
            self.cacheChoice = shared ? .applicationShared : .ephemeral(ResponseCache(memoryCapacity: SharedStores.ephemeralMemoryCapacity))
            self.cookieChoice = shared ? .applicationShared : .ephemeral(CookieStore())
            self.credentialChoice = shared ? .applicationShared : .ephemeral(CredentialStore())
        }

        /// The credential store. Default configurations use the application's
        /// shared store (permanent credentials in `Credentials.sqlite` under
        /// `$XDG_DATA_HOME/<app>/`, mode 0600); ephemeral ones have an in-memory store of
        /// their own, which their sessions use. Setting a store makes every session from this configuration
        /// share it; setting nil keeps no credentials.
        var urlCredentialStorage: CredentialStore? {
            get {
                switch credentialChoice {
                case .explicit(let store), .ephemeral(let store): return store
                case .applicationShared: return SharedStores.credentialStore(for: applicationIdentifier)
                case .none: return nil
                }
            }
            set { credentialChoice = newValue.map { .explicit($0) } ?? .none }
        }

        /// Persistent stores shared per application identifier: the cache under
        /// `$XDG_CACHE_HOME/<app>/`, cookies under `$XDG_DATA_HOME/<app>/`.
        static var `default`: Values {
            Values(kind: .default, shared: true)
        }

        /// Nothing on disk: an in-memory cache, cookie store and credential
        /// store of this configuration's own, which its sessions use and
        /// empty when invalidated.
        static var ephemeral: Values {
            Values(kind: .ephemeral, shared: false)
        }

        /// A background configuration (its transfers will run in a separate
        /// process; until then it behaves like `.default`).
        ///
        /// - Parameter identifier: Names the session; one live session per identifier.
        static func background(identifier: String) -> Values {
            Values(kind: .background(identifier: identifier), shared: true)
        }

        /// The identifier of a background configuration.
        var identifier: String? {
            if case .background(let identifier) = kind { return identifier }
            return nil
        }

        /// The cache a new session gets.
        func resolveCache() -> ResponseCache? {
            switch cacheChoice {
            case .explicit(let cache): return cache
            case .none: return nil
            case .ephemeral(let cache): return cache
            case .applicationShared: return SharedStores.cache(for: applicationIdentifier)
            }
        }

        /// The cookie store a new session gets.
        func resolveCookieStore() -> CookieStore? {
            switch cookieChoice {
            case .explicit(let store): return store
            case .none: return nil
            case .ephemeral(let store): return store
            case .applicationShared: return SharedStores.cookieStore(for: applicationIdentifier)
            }
        }

        /// The credential store a new session gets.
        func resolveCredentialStore() -> CredentialStore? {
            switch credentialChoice {
            case .explicit(let store): return store
            case .none: return nil
            case .ephemeral(let store): return store
            case .applicationShared: return SharedStores.credentialStore(for: applicationIdentifier)
            }
        }
    }
}
