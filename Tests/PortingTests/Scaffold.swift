// Not ported: what the programs in URLSessionSources need besides Apple's
// API. The ported programs import nothing of ours themselves, as a user's
// code after renaming imports URLLoading where it imported Foundation.
@_exported import URLLoading
@_exported import TestSupport
import Foundation

/// A folder under the test run's temporary directory, removed by `remove()`.
struct Scratch {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("porting-\(UUID().uuidString)", isDirectory: true)

    init() throws {
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}
