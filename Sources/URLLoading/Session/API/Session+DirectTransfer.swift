package import Foundation
#if canImport(FoundationNetworking)
package import FoundationNetworking
#endif
package import Transport

extension Session {
    /// The transfer a GET without a body sends when nothing of this session
    /// adds to it or decides about it, with the transport to run it on: for
    /// a caller that runs the transfer itself and reads its head
    /// (transferd's downloads, which write each chunk to their file on the
    /// transport's thread, as a download task does).
    ///
    /// Nil when the session has a part in the request: a cache, a cookie or
    /// credential store, `URLProtocol` classes, interceptors, a delegate that
    /// evaluates server trust, a proxy or Unix socket for the URL (a 407 is
    /// the session's to answer), credentials in the URL, or a request the
    /// session would refuse (its task says why). The caller then runs a
    /// task; it also does when the head is a redirect or a challenge.
    ///
    /// - Parameter now: When the task begins: the resource timeout counts from it.
    package func directTransfer(for request: URLRequest, now: Date = Date()) -> (request: TransferRequest, executor: any TransferExecutor)? {
        guard remote == nil, urlCache == nil, credentialStore == nil, cookieStore == nil || !settings.httpShouldSetCookies,
            protocolTransfers == nil, settings.interceptors.isEmpty, settings.unixSocketPath == nil, delegate?.evaluatesServerTrust != true,
            let transport, let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            url.user(percentEncoded: false) == nil, settings.proxy(for: url) == nil,
            (request.httpMethod ?? "GET") == "GET", request.httpBody == nil, request.httpBodyStream == nil
        else { return nil }
        let deadline = Self.deadline(from: now, resourceTimeout: settings.timeoutIntervalForResource)
        guard case .success(var transfer) = HopPlan.base(request, body: .none, settings: settings, deadline: deadline, now: now) else { return nil }
        HopPlan.complete(&transfer, cookie: nil, authorization: [], libcurlAuthentication: nil, validators: [], isDownload: true)
        return (transfer, transport)
    }
}
