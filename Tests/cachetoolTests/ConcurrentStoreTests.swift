import Foundation
import Testing
import TestSupport

/// Several processes writing one application's stores at once
/// never fail on each other's locks within the busy timeout.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(3)))) struct ConcurrentStoreTests {
    @Test("Four processes open, write and close the cookie store and the cache 200 times each: no error")
    func fourWriters() async throws {
        let directory = TemporaryDirectory()
        let cache = directory.path("cache")
        let data = directory.path("data")
        let writers = try (0..<4).map { _ in try ChildProcess.start(ChildProcess.helper, ["store-loop", cache, data, "200"]) }
        for writer in writers {
            let result = try await writer.wait()
            #expect(result.status == 0 && result.standardOutput.contains("rounds 200"), "\(result.standardError)")
        }
    }
}
