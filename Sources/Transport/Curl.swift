import CCurl
import Locking

/// Process-wide libcurl facts and set-up.
package enum Curl {
    private static let initialized = Lock<CurlError??>(nil)

    /// Calls `curl_global_init` once per process, before any handle exists.
    ///
    /// - Throws: `CurlError` when libcurl cannot initialise (no memory, or
    ///   the TLS library failed).
    package static func globalInit() throws(CurlError) {
        let result = initialized.withLock { state -> CurlError? in
            if let done = state { return done }
            let code = curl_global_init(Int(CURL_GLOBAL_ALL))
            let error: CurlError? = code == CURLE_OK ? nil : CurlError(easy: code)
            state = .some(error)
            return error
        }
        if let result { throw result }
    }

    /// What the linked libcurl is and can do.
    package struct Info: Sendable, Equatable {
        /// libcurl's version, for example "7.88.1".
        package let version: String
        /// The TLS library, for example "OpenSSL/3.0.19".
        package let tlsBackend: String?
        /// Whether libcurl was built with HTTP/2 (nghttp2).
        package let http2: Bool
        /// Whether libcurl can decode gzip/deflate (`Accept-Encoding`).
        package let contentDecoding: Bool
        /// Whether NTLM and Negotiate (SPNEGO) are available.
        package let ntlm: Bool
        package let negotiate: Bool
    }

    /// The linked libcurl's version and features.
    package static var info: Info {
        guard let data = urlloading_version_info()?.pointee else {
            return Info(version: "unknown", tlsBackend: nil, http2: false, contentDecoding: false, ntlm: false, negotiate: false)
        }
        let features = data.features
        return Info(
            version: data.version.map { String(cString: $0) } ?? "unknown",
            tlsBackend: data.ssl_version.map { String(cString: $0) },
            http2: features & CURL_VERSION_HTTP2 != 0,
            contentDecoding: features & CURL_VERSION_LIBZ != 0,
            ntlm: features & CURL_VERSION_NTLM != 0,
            negotiate: features & CURL_VERSION_SPNEGO != 0)
    }
}
