#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Wake-ups of waiting readers that a transport thread holds until the end
/// of its turn (one `curl_multi_perform` and the ends it reports), so that
/// a reader woken for a response's head finds the body and the end that
/// came in the same turn, instead of being woken once for each.
///
/// Elsewhere (any thread that is not a transport loop's) a wake-up runs at
/// once.
package enum TurnWakeups {
    /// One loop thread's held wake-ups; only that thread touches it.
    final class Held {
        var work: [@Sendable () -> Void] = []

        func flush() {
            while !work.isEmpty {
                let now = work
                work.removeAll(keepingCapacity: true)
                now.forEach { $0() }
            }
        }
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Runs `wake` at the end of this transport thread's turn, or now.
    package static func run(_ wake: @escaping @Sendable () -> Void) {
        guard let held = pthread_getspecific(key) else { return wake() }
        Unmanaged<Held>.fromOpaque(held).takeUnretainedValue().work.append(wake)
    }

    /// Makes the calling thread a loop thread holding wake-ups in `held`
    /// (nil: no longer).
    static func hold(in held: Held?) {
        pthread_setspecific(key, held.map { Unmanaged.passUnretained($0).toOpaque() })
    }
}
