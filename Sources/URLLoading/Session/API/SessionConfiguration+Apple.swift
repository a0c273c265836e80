import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// Members of Apple's `URLSessionConfiguration` that code being ported sets.
/// Each is kept, copied with the configuration and given back;
/// none changes what a session does on Linux, for the reason each says.
extension SessionConfiguration {
    /// Apple's settings of the radio and the system's network policy.
    struct PlatformSettings: Sendable, Equatable {
        var networkServiceType: URLRequest.NetworkServiceType = .default
        var allowsCellularAccess = true
        var allowsExpensiveNetworkAccess = true
        var allowsConstrainedNetworkAccess = true
        var httpShouldUsePipelining = false
        var shouldUseExtendedBackgroundIdleMode = false
    }

    /// The service type Apple's system schedules the traffic by. Linux has no
    /// such scheduler (nor a DSCP marking libcurl would set by it): kept, no effect.
    public var networkServiceType: URLRequest.NetworkServiceType {
        get { value(\.platform.networkServiceType) }
        set { update(\.platform.networkServiceType, newValue) }
    }

    /// Whether Apple's system may use a cellular interface. Linux does not
    /// tell a cellular link from another: kept, no effect.
    public var allowsCellularAccess: Bool {
        get { value(\.platform.allowsCellularAccess) }
        set { update(\.platform.allowsCellularAccess, newValue) }
    }

    /// Whether Apple's system may use an interface it marks expensive. Linux
    /// marks none: kept, no effect.
    public var allowsExpensiveNetworkAccess: Bool {
        get { value(\.platform.allowsExpensiveNetworkAccess) }
        set { update(\.platform.allowsExpensiveNetworkAccess, newValue) }
    }

    /// Whether Apple's system may use an interface in Low Data Mode. Linux
    /// has no such mode: kept, no effect.
    public var allowsConstrainedNetworkAccess: Bool {
        get { value(\.platform.allowsConstrainedNetworkAccess) }
        set { update(\.platform.allowsConstrainedNetworkAccess, newValue) }
    }

    /// HTTP/1.1 pipelining. libcurl removed pipelining in 7.62 (and Apple's
    /// own stack ignores it since HTTP/2): kept, no effect; connections are
    /// reused and HTTP/2 multiplexes instead.
    public var httpShouldUsePipelining: Bool {
        get { value(\.platform.httpShouldUsePipelining) }
        set { update(\.platform.httpShouldUsePipelining, newValue) }
    }

    /// Whether Apple keeps a background app's sockets open longer. transferd
    /// is not suspended as an app is: kept, no effect.
    public var shouldUseExtendedBackgroundIdleMode: Bool {
        get { value(\.platform.shouldUseExtendedBackgroundIdleMode) }
        set { update(\.platform.shouldUseExtendedBackgroundIdleMode, newValue) }
    }
}
