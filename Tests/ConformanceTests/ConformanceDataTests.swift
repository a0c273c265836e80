import Foundation
import Testing

/// The conformance data is where the runners look for it, whole.
@Suite struct ConformanceDataTests {
    @Test func everySuiteDirectoryHasItsReadme() throws {
        guard let root = ConformanceData.suite("index") else { return }
        let index = try String(contentsOf: root.deletingLastPathComponent().appendingPathComponent("README.md"), encoding: .utf8)
        // The index's table names each suite as `| `dir/` | ...`.
        let names = index.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("| `"), let end = line.dropFirst(3).firstIndex(of: "/") else { return nil }
            return String(line[line.index(line.startIndex, offsetBy: 3)..<end])
        }
        #expect(names.count >= 6)
        for name in names {
            let readme = root.deletingLastPathComponent().appendingPathComponent(name).appendingPathComponent("README.md")
            #expect(FileManager.default.fileExists(atPath: readme.path), "missing \(readme.path)")
        }
    }
}
