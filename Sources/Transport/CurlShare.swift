import CCurl
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A libcurl share object (`CURLSH`) for the loops of one transport: DNS
/// answers and TLS sessions found by one loop serve the others. Connections
/// are not in it — libcurl does not support sharing its connection cache
/// between threads — so `CurlMulti` keeps each origin on one loop instead.
///
/// libcurl calls the lock callbacks from every loop thread; each kind of
/// data has its own `pthread_mutex_t`, as libcurl asks. Why it may cross
/// threads: its two pointers never change after `init`, and libcurl reaches
/// the shared data only under those mutexes.
final class CurlShare: @unchecked Sendable {
    /// The share handle; easy handles join it with `CURLOPT_SHARE`.
    let handle: UnsafeMutableRawPointer
    /// One mutex per `curl_lock_data` kind, allocated once, never moved.
    private let mutexes: UnsafeMutablePointer<pthread_mutex_t>
    private static let kinds = Int(CURL_LOCK_DATA_LAST.rawValue)

    /// A share of DNS answers and TLS sessions.
    ///
    /// - Throws: `CurlError` when libcurl refuses the share object.
    init() throws(CurlError) {
        guard let handle = curl_share_init() else { throw CurlError(share: CURLSHE_NOMEM) }
        mutexes = .allocate(capacity: Self.kinds)
        for index in 0..<Self.kinds {
            (mutexes + index).initialize(to: pthread_mutex_t())
            pthread_mutex_init(mutexes + index, nil)
        }
        self.handle = handle
        var code = urlloading_share_setopt_pointer(handle, CURLSHOPT_USERDATA, UnsafeMutableRawPointer(mutexes))
        if code == CURLSHE_OK {
            code = urlloading_share_setopt_lock(handle) { _, data, _, user in
                guard let user, let slot = CurlShare.slot(data) else { return }
                pthread_mutex_lock(user.assumingMemoryBound(to: pthread_mutex_t.self) + slot)
            }
        }
        if code == CURLSHE_OK {
            code = urlloading_share_setopt_unlock(handle) { _, data, user in
                guard let user, let slot = CurlShare.slot(data) else { return }
                pthread_mutex_unlock(user.assumingMemoryBound(to: pthread_mutex_t.self) + slot)
            }
        }
        for kind in [CURL_LOCK_DATA_DNS, CURL_LOCK_DATA_SSL_SESSION] where code == CURLSHE_OK {
            code = urlloading_share_setopt_long(handle, CURLSHOPT_SHARE, Int(kind.rawValue))
        }
        guard code == CURLSHE_OK else {
            curl_share_cleanup(handle)
            Self.destroy(mutexes)
            throw CurlError(share: code)
        }
    }

    /// The mutex of a kind of data; nil for a kind this libcurl does not name.
    private static func slot(_ data: curl_lock_data) -> Int? {
        let index = Int(data.rawValue)
        return (0..<kinds).contains(index) ? index : nil
    }

    private static func destroy(_ mutexes: UnsafeMutablePointer<pthread_mutex_t>) {
        for index in 0..<kinds { pthread_mutex_destroy(mutexes + index) }
        mutexes.deallocate()
    }

    deinit {
        // Every loop holds this object until its thread ended and its
        // handles were cleaned up, so no easy handle uses the share now; if
        // one did, libcurl refuses (CURLSHE_IN_USE) and the memory stays.
        if curl_share_cleanup(handle) == CURLSHE_OK { Self.destroy(mutexes) }
    }
}
