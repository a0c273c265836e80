import Foundation

/// Where the third-party conformance data lives: `$URLLOADING_CONFORMANCE_DIR`,
/// else `../shared/conformance` beside the package (always there in CI).
/// The data is other projects' and is never copied into this repository.
enum ConformanceData {
    static let directory: URL? = {
        let fileManager = FileManager.default
        if let explicit = ProcessInfo.processInfo.environment["URLLOADING_CONFORMANCE_DIR"], !explicit.isEmpty {
            return URL(fileURLWithPath: explicit, isDirectory: true)
        }
        let packageRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let beside = packageRoot.deletingLastPathComponent().appendingPathComponent("shared/conformance", isDirectory: true)
        return fileManager.fileExists(atPath: beside.path) ? beside : nil
    }()

    /// The directory of one suite, or nil (after saying so in one line) when
    /// the data is absent: the only case a test may stand down.
    static func suite(_ name: String) -> URL? {
        guard let directory else {
            print("conformance \(name): data not found (set URLLOADING_CONFORMANCE_DIR or place shared/conformance beside the package); not run")
            return nil
        }
        return directory.appendingPathComponent(name, isDirectory: true)
    }
}
