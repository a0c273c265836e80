public import Foundation

/// Deterministic responses for cache tests that span processes: any process
/// can recompute the body stored for a URL and check it.
public enum CacheFixtures {
    /// The body for `url`: its size depends on `index` (every tenth is large
    /// enough to be kept in a file beside the database), its bytes on the URL.
    public static func body(for url: String, index: Int) -> Data {
        let size = index % 10 == 0 ? 150_000 + index % 7 * 1000 : 500 + (index * 7919) % 6000
        let seed = Array(url.utf8)
        var bytes = [UInt8](repeating: 0, count: size)
        var state: UInt64 = 1469598103934665603
        for byte in seed { state = (state ^ UInt64(byte)) &* 1099511628211 }
        // Eight bytes a step, through a pointer: a loop over single bytes held
        // a cooperative thread for seconds in debug and sanitizer builds.
        bytes.withUnsafeMutableBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            while offset < size {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                var word = state.bigEndian
                (base + offset).copyMemory(from: &word, byteCount: min(8, size - offset))
                offset += 8
            }
        }
        return Data(bytes)
    }

    /// The index encoded at the end of a fixture URL (`.../<index>`).
    public static func index(of url: String) -> Int? {
        url.split(separator: "/").last.flatMap { Int($0) }
    }
}
