import CTLS
#if canImport(Glibc)
import Glibc
#endif

/// How a stream's TLS checks its peer.
package struct TLSOptions: Sendable, Equatable {
    /// A PEM file of trusted roots; nil for the system's.
    package var rootsFile: String?
    /// Lowest and highest protocol versions as (major, minor), TLS 1.2 = (1, 2).
    package var minimumVersion: (major: Int, minor: Int)?
    package var maximumVersion: (major: Int, minor: Int)?

    package init(rootsFile: String? = nil, minimumVersion: (major: Int, minor: Int)? = nil, maximumVersion: (major: Int, minor: Int)? = nil) {
        self.rootsFile = rootsFile
        self.minimumVersion = minimumVersion
        self.maximumVersion = maximumVersion
    }

    package static func == (lhs: TLSOptions, rhs: TLSOptions) -> Bool {
        lhs.rootsFile == rhs.rootsFile && lhs.minimumVersion.map { [$0.major, $0.minor] } == rhs.minimumVersion.map { [$0.major, $0.minor] }
            && lhs.maximumVersion.map { [$0.major, $0.minor] } == rhs.maximumVersion.map { [$0.major, $0.minor] }
    }

    /// OpenSSL's number for a version, nil when it names none.
    static func protocolNumber(_ version: (major: Int, minor: Int)) -> Int32? {
        guard version.major == 1 else { return nil }
        switch version.minor {
        case 0: return TLS1_VERSION
        case 1: return TLS1_1_VERSION
        case 2: return TLS1_2_VERSION
        case 3: return TLS1_3_VERSION
        default: return nil
        }
    }
}

/// TLS over a connected, non-blocking socket (OpenSSL): the client side of
/// a handshake begun on an open connection, then reads and writes that say
/// when they must wait for the socket. Used by one thread at a time.
final class TLSChannel {
    /// What a step of OpenSSL needs.
    enum Step {
        case done(Int)
        case wantRead
        case wantWrite
        /// The peer ended TLS (close_notify): no more bytes.
        case closed
        case failed(String)
    }

    private let context: OpaquePointer
    private let ssl: OpaquePointer

    /// Prepares a client handshake on `descriptor` for `serverName`
    /// (certificate checked against the roots and the name).
    init(descriptor: Int32, serverName: String, options: TLSOptions) throws(StreamError) {
        guard let method = TLS_client_method(), let context = SSL_CTX_new(method) else {
            throw StreamError(.tls, "OpenSSL could not make a TLS context")
        }
        self.context = context
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        let rootsLoaded =
            if let file = options.rootsFile { SSL_CTX_load_verify_locations(context, file, nil) == 1 } else { SSL_CTX_set_default_verify_paths(context) == 1 }
        if let minimum = options.minimumVersion.flatMap(TLSOptions.protocolNumber) { _ = ctls_set_min_version(context, minimum) }
        if let maximum = options.maximumVersion.flatMap(TLSOptions.protocolNumber) { _ = ctls_set_max_version(context, maximum) }
        guard rootsLoaded, let ssl = SSL_new(context) else {
            SSL_CTX_free(context)
            throw StreamError(.tls, "cannot load the trusted roots \(options.rootsFile ?? "of the system")")
        }
        self.ssl = ssl
        _ = ctls_set_mode_partial_writes(ssl)
        _ = SSL_set_fd(ssl, descriptor)
        // The name goes in SNI and is what the certificate must show.
        _ = ctls_set_server_name(ssl, serverName)
        if let parameters = SSL_get0_param(ssl) {
            if Self.isAddress(serverName) {
                _ = X509_VERIFY_PARAM_set1_ip_asc(parameters, serverName)
            } else {
                X509_VERIFY_PARAM_set_hostflags(parameters, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
                _ = X509_VERIFY_PARAM_set1_host(parameters, serverName, 0)
            }
        }
        SSL_set_connect_state(ssl)
    }

    deinit {
        SSL_free(ssl)
        SSL_CTX_free(context)
    }

    private static func isAddress(_ name: String) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 16)
        return inet_pton(AF_INET, name, &buffer) == 1 || inet_pton(AF_INET6, name, &buffer) == 1
    }

    /// One step of the handshake.
    func handshake() -> Step {
        step(SSL_do_handshake(ssl)) { _ in .done(0) }
    }

    /// Reads into `buffer`; `.done(n)` with n > 0 bytes.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Step {
        step(SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count))) { .done(Int($0)) }
    }

    /// Writes from `bytes`; `.done(n)` with the bytes taken.
    func write(_ bytes: UnsafeRawBufferPointer) -> Step {
        guard !bytes.isEmpty else { return .done(0) }
        return step(SSL_write(ssl, bytes.baseAddress, Int32(clamping: bytes.count))) { .done(Int($0)) }
    }

    /// Sends close_notify (one step; the peer's answer is not awaited).
    func shutdown() -> Step {
        let result = SSL_shutdown(ssl)
        if result >= 0 { return .done(0) }
        return step(result) { _ in .done(0) }
    }

    /// Bytes OpenSSL holds decrypted and not yet read.
    var pending: Int { Int(SSL_pending(ssl)) }

    private func step(_ result: Int32, success: (Int32) -> Step) -> Step {
        if result > 0 { return success(result) }
        let error = SSL_get_error(ssl, result)
        switch error {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case SSL_ERROR_ZERO_RETURN: return .closed
        default:
            let verify = SSL_get_verify_result(ssl)
            if verify != X509_V_OK, let text = X509_verify_cert_error_string(verify) {
                ERR_clear_error()
                return .failed("the server's certificate is not trusted: \(String(cString: text))")
            }
            let code = ERR_get_error()
            ERR_clear_error()
            if code == 0 { return error == SSL_ERROR_SYSCALL ? .closed : .failed("TLS failed (\(error))") }
            var text = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &text, text.count)
            return .failed("TLS failed: \(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
        }
    }
}
