public import Foundation

/// A fresh directory under the system's temporary directory, removed when
/// the value is deinitialised.
public final class TemporaryDirectory {
    /// The directory.
    public let url: URL

    /// Creates the directory, named after `name` (the calling function).
    public init(_ name: String = #function) {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("urlloading-\(safe)-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The path of `component` inside the directory.
    public func path(_ component: String) -> String { url.appendingPathComponent(component).path }

    deinit { try? FileManager.default.removeItem(at: url) }
}
