extension ProtectionSpace.AuthenticationMethod {
    /// Apple's name for the method: the value of Foundation's
    /// `NSURLAuthenticationMethod*` constant (`"NSURLAuthenticationMethodHTTPDigest"`, ...).
    public var appleName: String {
        switch self {
        case .httpBasic: "NSURLAuthenticationMethodHTTPBasic"
        case .httpDigest: "NSURLAuthenticationMethodHTTPDigest"
        case .ntlm: "NSURLAuthenticationMethodNTLM"
        case .negotiate: "NSURLAuthenticationMethodNegotiate"
        case .clientCertificate: "NSURLAuthenticationMethodClientCertificate"
        case .serverTrust: "NSURLAuthenticationMethodServerTrust"
        default: "NSURLAuthenticationMethodDefault"
        }
    }

    /// The method Apple's name stands for; nil for a name that is not one.
    public init?(appleName: String) {
        let methods: [Self] = [.default, .httpBasic, .httpDigest, .ntlm, .negotiate, .clientCertificate, .serverTrust]
        guard let method = methods.first(where: { $0.appleName == appleName }) else { return nil }
        self = method
    }

    /// Compares with one of Foundation's `NSURLAuthenticationMethod*`
    /// constants, as ported code does
    /// (`space.authenticationMethod == NSURLAuthenticationMethodHTTPDigest`).
    public static func == (method: Self, appleName: String) -> Bool { method.appleName == appleName }
    /// The same, the other way round.
    public static func == (appleName: String, method: Self) -> Bool { method.appleName == appleName }
    /// The same, negated.
    public static func != (method: Self, appleName: String) -> Bool { method.appleName != appleName }
    /// Lets `switch space.authenticationMethod` match Foundation's constants.
    public static func ~= (appleName: String, method: Self) -> Bool { method.appleName == appleName }
}

extension ProtectionSpace {
    /// Apple's initializer: the method given by one of Foundation's
    /// `NSURLAuthenticationMethod*` names (nil or an unknown name: `.default`).
    public init(host: String, port: Int, protocol: String?, realm: String?, authenticationMethod: String?) {
        self.init(
            host: host, port: port, protocol: `protocol` ?? "http", realm: realm,
            authenticationMethod: authenticationMethod.flatMap(AuthenticationMethod.init(appleName:)) ?? .default)
    }
}
