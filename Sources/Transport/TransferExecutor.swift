/// What runs a session's transfers: libcurl's loops (`CurlMulti`), the
/// session's own connections, or, in the engine's tests, a script that plays
/// the transport's events without a socket. The task engine knows only this.
///
/// The contract every executor keeps, and the engine relies on:
/// - `start` returns at once; the transfer's events reach its observer
///   later, on the executor's thread (possibly before `start` returned).
/// - Each started transfer ends with exactly one `transferDidComplete`,
///   `.cancelled` after a `cancel`, unless it completed before.
/// - Pausing is the observer's answer, not a command: a chunk it refuses
///   (`transferDidReceive` returns false) or a head it holds
///   (`transferMayProceedPastHead` returns false) stops the transfer, and
///   after `unpause` the same chunk is delivered again.
/// - Commands for a transfer that already ended do nothing.
package protocol TransferExecutor: AnyObject, Sendable {
    /// Starts a transfer whose events go to `observer`. After `shutdown`,
    /// the observer hears at once that it failed.
    @discardableResult
    func start(_ request: TransferRequest, observer: any TransferObserver) -> CurlMulti.TransferID
    /// Ends a transfer: its observer hears `.cancelled` unless it already completed.
    func cancel(_ id: CurlMulti.TransferID)
    /// Lets a transfer go on whose observer refused a chunk or held the head.
    func unpause(_ id: CurlMulti.TransferID)
    /// Cancels every transfer; no more start.
    func shutdown()
}

extension CurlMulti: TransferExecutor {}
