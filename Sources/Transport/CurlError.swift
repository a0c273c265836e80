import CCurl

/// A libcurl failure: the raw `CURLcode` (or `CURLMcode` for the multi
/// interface, `CURLSHcode` for a share object) and libcurl's own text for it.
package struct CurlError: Error, CustomStringConvertible, Sendable, Equatable {
    /// Which libcurl interface reported the code.
    package enum Interface: Sendable, Equatable { case easy, multi, share, global }

    /// The raw code.
    package let code: Int32
    /// Which interface the code belongs to.
    package let interface: Interface
    /// libcurl's explanation (`curl_easy_strerror` or the error buffer).
    package let message: String

    init(easy code: CURLcode, detail: String? = nil) {
        self.code = Int32(code.rawValue)
        self.interface = .easy
        let text = String(cString: curl_easy_strerror(code))
        self.message = detail.map { $0.isEmpty ? text : "\(text): \($0)" } ?? text
    }

    init(multi code: CURLMcode) {
        self.code = Int32(code.rawValue)
        self.interface = .multi
        self.message = String(cString: curl_multi_strerror(code))
    }

    init(share code: CURLSHcode) {
        self.code = Int32(code.rawValue)
        self.interface = .share
        self.message = String(cString: curl_share_strerror(code))
    }

    package var description: String {
        "libcurl \(interface) error \(code): \(message)"
    }
}
