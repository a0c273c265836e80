import CCurl
import Foundation

/// What libcurl measured of a transfer, read when it ends (or is cut
/// short), in the session's terms.
extension Transfer {
    func metrics() -> TransferMetrics {
        var metrics = TransferMetrics()
        func seconds(_ info: CURLINFO) -> Double {
            var value: curl_off_t = 0
            _ = urlloading_easy_getinfo_off_t(handle, info, &value)
            return Double(value) / 1_000_000
        }
        func integer(_ info: CURLINFO) -> Int {
            var value = 0
            _ = urlloading_easy_getinfo_long(handle, info, &value)
            return value
        }
        func bytes(_ info: CURLINFO) -> Int64 {
            var value: curl_off_t = 0
            _ = urlloading_easy_getinfo_off_t(handle, info, &value)
            return Int64(value)
        }
        func text(_ info: CURLINFO) -> String? {
            var value: UnsafeMutablePointer<CChar>?
            _ = urlloading_easy_getinfo_string(handle, info, &value)
            return value.map { String(cString: $0) }
        }
        metrics.nameLookup = seconds(CURLINFO_NAMELOOKUP_TIME_T)
        metrics.connect = seconds(CURLINFO_CONNECT_TIME_T)
        metrics.tlsHandshake = seconds(CURLINFO_APPCONNECT_TIME_T)
        metrics.requestSent = seconds(CURLINFO_PRETRANSFER_TIME_T)
        metrics.firstByte = seconds(CURLINFO_STARTTRANSFER_TIME_T)
        metrics.total = seconds(CURLINFO_TOTAL_TIME_T)
        metrics.bytesSent = bytes(CURLINFO_SIZE_UPLOAD_T)
        metrics.bytesReceived = bytes(CURLINFO_SIZE_DOWNLOAD_T)
        metrics.headerBytes = Int64(integer(CURLINFO_HEADER_SIZE))
        metrics.httpVersion = head.httpVersion
        metrics.reusedConnection = integer(CURLINFO_NUM_CONNECTS) == 0
        metrics.remoteAddress = text(CURLINFO_PRIMARY_IP)
        metrics.remotePort = integer(CURLINFO_PRIMARY_PORT)
        metrics.localAddress = text(CURLINFO_LOCAL_IP)
        metrics.localPort = integer(CURLINFO_LOCAL_PORT)
        metrics.requestHeaderBytes = Int64(integer(CURLINFO_REQUEST_SIZE))
        metrics.tlsVersion = tlsVersion
        metrics.tlsCipherSuite = tlsCipherSuite
        metrics.viaProxy = viaProxy
        metrics.endDate = Date()
        if collectsCertificates {
            metrics.certificateChain = certificateChain()
        }
        return metrics
    }

    /// The PEM certificates libcurl collected (CURLOPT_CERTINFO), leaf first.
    private func certificateChain() -> [String] {
        var info: UnsafeMutablePointer<curl_certinfo>?
        guard urlloading_easy_getinfo_certinfo(handle, &info) == CURLE_OK, let info, let lists = info.pointee.certinfo else { return [] }
        var chain: [String] = []
        for index in 0..<Int(info.pointee.num_of_certs) {
            var node = lists[index]
            while let current = node {
                if let data = current.pointee.data {
                    let entry = String(cString: data)
                    if entry.hasPrefix("Cert:") { chain.append(String(entry.dropFirst("Cert:".count))) }
                }
                node = current.pointee.next
            }
        }
        return chain
    }
}
