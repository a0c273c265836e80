public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import Locking

/// The settings of a session (Apple's `URLSessionConfiguration`).
///
/// A reference type, as Apple's: `let configuration = SessionConfiguration.default`
/// can be changed property by property. Each access to `.default` or
/// `.ephemeral` makes a new object, a session copies the configuration when
/// it is made (so changing it afterwards never changes that session), and
/// `Session.configuration` hands out a copy. Safe to use from any
/// thread: its values sit behind a lock.
public final class SessionConfiguration: Sendable, CustomStringConvertible {
    /// What kind of session the configuration makes.
    public enum Kind: Sendable, Hashable {
        /// Persistent stores shared by every default session of the application.
        case `default`
        /// Stores in memory, private to each session made from it.
        case ephemeral
        /// Like default; transfers run in a separate process (not yet executed
        /// out of process).
        case background(identifier: String)
    }

    private let values: Lock<Values>

    init(_ values: Values) {
        self.values = Lock(values)
    }

    /// The values as they are now: what a session keeps.
    var snapshot: Values { values.withLock { $0 } }

    func value<Value: Sendable>(_ keyPath: KeyPath<Values, Value>) -> Value {
        values.withLock { $0[keyPath: keyPath] }
    }

    func update<Value: Sendable>(_ keyPath: WritableKeyPath<Values, Value>, _ newValue: Value) {
        values.withLock { $0[keyPath: keyPath] = newValue }
    }

    /// An independent copy (Apple's `copy()`).
    public func copy() -> SessionConfiguration { SessionConfiguration(snapshot) }

    /// Persistent stores shared per application identifier: the cache under
    /// `$XDG_CACHE_HOME/<app>/`, cookies and credentials under
    /// `$XDG_DATA_HOME/<app>/`. A new object on each access.
    public static var `default`: SessionConfiguration { SessionConfiguration(.default) }

    /// Nothing on disk. Each ephemeral configuration has an in-memory cache,
    /// cookie store and credential store of its own, which the sessions made
    /// from it use (as Apple's: `configuration.httpCookieStorage` shows what
    /// a session stored) and empty when they are invalidated; another
    /// ephemeral configuration has others. A new object on each access.
    public static var ephemeral: SessionConfiguration { SessionConfiguration(.ephemeral) }

    /// A background configuration (Apple's `background(withIdentifier:)`):
    /// its download tasks and upload tasks from files are carried out by
    /// `transferd`, the user's transfer process, and go on when the app
    /// exits or dies; a session made again with the identifier receives
    /// their events (the DocC article "Background sessions").
    ///
    /// - Parameter identifier: Names the session; one live session per identifier.
    public static func background(withIdentifier identifier: String) -> SessionConfiguration {
        SessionConfiguration(.background(identifier: identifier))
    }

    /// The kind.
    public var kind: Kind { value(\.kind) }

    /// Background sessions: whether `transferd` starts the app when events
    /// wait and no session with the identifier is attached (Apple's
    /// relaunch; true by default), by running `launchCommand`: without one
    /// nothing is launched. The app learns why it was started from
    /// `Session.launchedForBackgroundSession`.
    public var sessionSendsLaunchEvents: Bool {
        get { value(\.sessionSendsLaunchEvents) }
        set { update(\.sessionSendsLaunchEvents, newValue) }
    }
    /// Background sessions: the program (an absolute path) and arguments
    /// `transferd` runs for launch events; nil (the default) launches
    /// nothing, so a program not written for launch events is never run
    /// again behind its user's back. Ours alone: iOS knows its apps.
    public var launchCommand: [String]? {
        get { value(\.launchCommand) }
        set { update(\.launchCommand, newValue) }
    }
    /// Background sessions: the tasks wait for the others to run first
    /// (Apple's "optimal conditions" are the machine's idle transfer slots here).
    public var isDiscretionary: Bool {
        get { value(\.isDiscretionary) }
        set { update(\.isDiscretionary, newValue) }
    }
    /// The identifier of a background configuration.
    public var identifier: String? { value(\.identifier) }

    /// Names the application's stores under the XDG directories; by default
    /// the executable's name. Ours alone (Apple's stores belong to the app's
    /// container).
    public var applicationIdentifier: String {
        get { value(\.applicationIdentifier) }
        set { update(\.applicationIdentifier, newValue) }
    }
    /// The cache policy of requests that use `.useProtocolCachePolicy`.
    public var requestCachePolicy: URLRequest.CachePolicy {
        get { value(\.requestCachePolicy) }
        set { update(\.requestCachePolicy, newValue) }
    }
    /// Seconds without any byte moving before a request fails (Apple: 60).
    public var timeoutIntervalForRequest: TimeInterval {
        get { value(\.timeoutIntervalForRequest) }
        set { update(\.timeoutIntervalForRequest, newValue) }
    }
    /// Seconds a whole task may take (Apple: 7 days).
    public var timeoutIntervalForResource: TimeInterval {
        get { value(\.timeoutIntervalForResource) }
        set { update(\.timeoutIntervalForResource, newValue) }
    }
    /// Connections libcurl may open to one host (Apple: 6).
    public var httpMaximumConnectionsPerHost: Int {
        get { value(\.httpMaximumConnectionsPerHost) }
        set { update(\.httpMaximumConnectionsPerHost, newValue) }
    }
    /// Redirects a task follows before failing with `.httpTooManyRedirects`
    /// (Apple's limit is 16). Ours alone.
    public var httpMaximumRedirects: Int {
        get { value(\.httpMaximumRedirects) }
        set { update(\.httpMaximumRedirects, newValue) }
    }
    /// Threads running libcurl for this session's transfers (ours alone). Each origin's transfers (or each proxy's) stay on one
    /// loop, so more loops never open more connections to an origin than
    /// `httpMaximumConnectionsPerHost`; the loops share DNS answers and TLS
    /// sessions. More loops help only with many origins and many cores.
    /// Values outside 1...16 are taken as the nearest of them. Default:
    /// `defaultTransportLoops`.
    public var transportLoops: Int {
        get { value(\.transportLoops) }
        set { update(\.transportLoops, newValue) }
    }
    /// One loop per eight CPUs, at least one and at most four: one loop
    /// carries tens of thousands of small requests a second, and each loop
    /// keeps a core busy while it spins.
    public static var defaultTransportLoops: Int {
        min(4, max(1, ProcessInfo.processInfo.activeProcessorCount / 8))
    }
    /// Whether requests get cookies from the cookie store and responses'
    /// `Set-Cookie` fields go into it (per request, `URLRequest.httpShouldHandleCookies`
    /// must allow it too).
    public var httpShouldSetCookies: Bool {
        get { value(\.httpShouldSetCookies) }
        set { update(\.httpShouldSetCookies, newValue) }
    }
    /// Which cookies responses may set (Apple's default: only from the main
    /// document's domain, which admits every response of a request without
    /// a `mainDocumentURL`).
    public var httpCookieAcceptPolicy: CookieAcceptPolicy {
        get { value(\.httpCookieAcceptPolicy) }
        set { update(\.httpCookieAcceptPolicy, newValue) }
    }
    /// Header fields added to every request that does not set them itself.
    public var httpAdditionalHeaders: [String: String] {
        get { value(\.httpAdditionalHeaders) }
        set { update(\.httpAdditionalHeaders, newValue) }
    }
    /// Whether a task waits for connectivity instead of failing at once.
    public var waitsForConnectivity: Bool {
        get { value(\.waitsForConnectivity) }
        set { update(\.waitsForConnectivity, newValue) }
    }
    /// A proxy for every request, as `scheme://host:port` with the scheme
    /// `http`, `https` (TLS to the proxy), `socks4a`, `socks5` or `socks5h`
    /// (names resolved by the proxy); nil for none. Ours, beside Apple's
    /// `connectionProxyDictionary`: set, it wins over that and over the
    /// environment's proxies and their `no_proxy`.
    public var proxyURL: URL? {
        get { value(\.proxyURL) }
        set { update(\.proxyURL, newValue) }
    }
    /// The `session` dimension of the counters and timers a session adds to
    /// the process's swift-metrics backend (requests by method and status
    /// class, their durations, cache results, bytes, connections; none
    /// without a bootstrapped backend); nil for a background session's
    /// identifier, else `default`.
    public var metricsLabel: String? {
        get { value(\.metricsLabel) }
        set { update(\.metricsLabel, newValue) }
    }
    /// A Unix-domain socket that every `http` and `https` request of the
    /// session connects to, whatever its host (a local daemon's API:
    /// `http://localhost/v1.43/info` with `/var/run/docker.sock`); nil for
    /// none. An absolute path of at most 107 bytes; any other fails each
    /// task with `badURL`. No proxy applies. The cache and cookies key on
    /// the URL as written; an `http+unix://` URL puts the socket in it.
    public var unixSocketPath: String? {
        get { value(\.unixSocketPath) }
        set { update(\.unixSocketPath, newValue) }
    }
    /// Whether requests go through the proxies the environment names when
    /// `proxyURL` is nil, as curl and Python's requests do (true by
    /// default): `http_proxy` for http URLs (in lower case only: an
    /// upper-case `HTTP_PROXY` can come from a CGI request's `Proxy:`
    /// field), `https_proxy` or `HTTPS_PROXY` for https URLs, `all_proxy` or
    /// `ALL_PROXY` for either without its own, and `no_proxy` or `NO_PROXY`
    /// for the hosts reached directly (`*`, names as suffixes, addresses and
    /// CIDR ranges). Read once, when a session is made; credentials in a
    /// proxy's URL answer its challenges and are never logged.
    public var proxiesFromEnvironment: Bool {
        get { value(\.proxiesFromEnvironment) }
        set { update(\.proxiesFromEnvironment, newValue) }
    }
    /// The environment `proxiesFromEnvironment` reads instead of the
    /// process's (tests).
    var proxyEnvironmentSource: [String: String]? {
        get { value(\.proxyEnvironmentSource) }
        set { update(\.proxyEnvironmentSource, newValue) }
    }
    /// Proxy rules decided in another process: transferd runs a
    /// background session's transfers with the rules the app's
    /// configuration chose (`proxyURL`, the dictionary or its environment).
    package var presetProxyRules: ProxyRules? {
        get { value(\.presetProxyRules) }
        set { update(\.presetProxyRules, newValue) }
    }
    /// Whether the session's transport loops spin for the next event
    /// after a turn that did work (the default): worth it when a caller
    /// waits on each answer. transferd, whose transfers nobody waits on one
    /// by one, turns it off and keeps the CPU for its other threads.
    package var transportSpins: Bool {
        get { value(\.transportSpins) }
        set { update(\.transportSpins, newValue) }
    }
    /// Whether the request timeout counts from a request's sending rather
    /// than from its start (off by default, as in Apple's sessions, where a
    /// task that waits past it for one of its host's connections times
    /// out). transferd turns it on: it hands the transport more transfers
    /// than a host has connections, and one that waits its turn in the
    /// transport's queue must not fail for it.
    package var requestTimeoutCountsFromSend: Bool {
        get { value(\.requestTimeoutCountsFromSend) }
        set { update(\.requestTimeoutCountsFromSend, newValue) }
    }
    /// The lowest TLS version to negotiate, e.g. `(1, 2)`.
    public var tlsMinimumSupportedVersion: (major: Int, minor: Int)? {
        get { value(\.tlsMinimumSupportedVersion) }
        set { update(\.tlsMinimumSupportedVersion, newValue) }
    }
    /// The highest TLS version to negotiate, e.g. `(1, 3)`.
    public var tlsMaximumSupportedVersion: (major: Int, minor: Int)? {
        get { value(\.tlsMaximumSupportedVersion) }
        set { update(\.tlsMaximumSupportedVersion, newValue) }
    }
    /// A PEM file of trust roots to verify servers against instead of the
    /// system's (custom roots). Ours alone.
    public var trustRootsFile: String? {
        get { value(\.trustRootsFile) }
        set { update(\.trustRootsFile, newValue) }
    }
    /// Interceptors, consulted in order before the network and before
    /// `protocolClasses`: the Swift-native form of a protocol class (an
    /// async function from a request to a request, a response or an error).
    /// Ours alone.
    public var interceptors: [any Interceptor] {
        get { value(\.interceptors) }
        set { update(\.interceptors, newValue) }
    }
    /// Foundation `URLProtocol` subclasses that load requests instead of the
    /// network, as Apple's: the first whose `canInit(with:)` takes a request
    /// loads it, from its `canonicalRequest(for:)`, and its client's calls
    /// feed the task's usual delivery (see the DocC article "Porting from
    /// URLSession"). Classes that are not `URLProtocol` subclasses are
    /// ignored. Empty by default: the session's own loading is not a class.
    public var protocolClasses: [AnyClass]? {
        get { value(\.protocolClasses) }
        set { update(\.protocolClasses, (newValue ?? []).compactMap { $0 as? URLProtocol.Type }) }
    }
    /// The interop version of resumable uploads (draft-ietf-httpbis-resumable-upload)
    /// that upload tasks from data or a file announce, as Apple's sessions
    /// do since iOS 17: `6` (the default, iOS 18.1's), `5` (iOS 18.0's) or
    /// `3` (iOS 17's). A server that answers with a `104` and a resumption
    /// URL on the request's origin lets a task whose connection fails
    /// mid-body ask how much arrived and send only the rest. Nil (or any
    /// other number) announces nothing and never resumes.
    public var resumableUploadVersion: Int? {
        get { value(\.resumableUploadVersion) }
        set { update(\.resumableUploadVersion, newValue) }
    }
    /// Whether responses carry an RFC 9211 `Cache-Status` field. Ours alone.
    public var sendsCacheStatus: Bool {
        get { value(\.sendsCacheStatus) }
        set { update(\.sendsCacheStatus, newValue) }
    }

    /// The response cache. Default configurations use the application's
    /// shared persistent cache; ephemeral ones an in-memory cache of their
    /// own, which their sessions use.
    /// Setting a cache makes every session from this configuration share it;
    /// setting nil turns caching off.
    public var urlCache: ResponseCache? {
        get { value(\.urlCache) }
        // Not through the key path: that would read the property first, and
        // reading a default configuration's cache opens the shared one.
        set { values.withLock { $0.cacheChoice = newValue.map { .explicit($0) } ?? .none } }
    }
    /// The cookie store. Default configurations use the application's
    /// shared persistent store (`Cookies.sqlite` under `$XDG_DATA_HOME/<app>/`);
    /// ephemeral ones an in-memory store of their own, which their sessions
    /// use. Setting a store makes every
    /// session from this configuration share it; setting nil turns cookies off.
    public var httpCookieStorage: CookieStore? {
        get { value(\.httpCookieStorage) }
        set { values.withLock { $0.cookieChoice = newValue.map { .explicit($0) } ?? .none } }
    }
    /// The credential store. Default configurations use the application's
    /// shared store (permanent credentials in `Credentials.sqlite` under
    /// `$XDG_DATA_HOME/<app>/`, mode 0600); ephemeral ones an in-memory store
    /// of their own, which their sessions use. Setting a store makes every session from this configuration
    /// share it; setting nil keeps no credentials.
    public var urlCredentialStorage: CredentialStore? {
        get { value(\.urlCredentialStorage) }
        set { values.withLock { $0.credentialChoice = newValue.map { .explicit($0) } ?? .none } }
    }

    /// The kind and the application identifier.
    public var description: String {
        let values = snapshot
        return "SessionConfiguration(\(values.kind), app: \(values.applicationIdentifier))"
    }
}
