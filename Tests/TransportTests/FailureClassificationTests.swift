import Testing
@testable import Transport

/// The transport's classification of libcurl failures, without sockets:
/// the numbers are libcurl's documented `CURLE_*` values.
@Suite struct FailureClassificationTests {
    @Test("CURLE codes map to the kinds the session acts on; the client-certificate alert is told apart by its text")
    func classification() {
        let cases: [(Int32, String, TransferError.Failure)] = [
            (1, "", .unsupportedURL), (3, "", .unsupportedURL), (5, "", .cannotFindHost), (6, "", .cannotFindHost),
            (7, "", .cannotConnect), (28, "", .timedOut), (18, "", .connectionLost), (52, "", .connectionLost),
            (55, "", .connectionLost), (56, "Connection reset by peer", .connectionLost), (8, "", .badResponse),
            (61, "", .badResponse), (35, "wrong version number", .tlsFailed), (60, "", .serverCertificateUntrusted),
            (90, "", .serverCertificateUntrusted), (58, "unable to set private key file", .clientCertificateRejected),
            (35, "error:0A00045C:SSL routines::tlsv13 alert certificate required", .clientCertificateRequired),
            (56, "OpenSSL SSL_read: error:0A000410:SSL routines::sslv3 alert handshake failure", .clientCertificateRequired),
            (98, "", .clientCertificateRequired), (26, "", .bodyUnreadable), (23, "", .cannotWrite), (42, "", .cancelled),
            (99, "", .other),
        ]
        for (code, message, expected) in cases {
            #expect(TransferError.failure(curlCode: code, message: message) == expected, "CURLE \(code) \(message)")
        }
        #expect(TransferError.idleTimeout(3).failure == .timedOut)
        #expect(TransferError.headTooLarge(10).failure == .badResponse)
        #expect(TransferError.cancelled.failure == .cancelled)
    }
}
