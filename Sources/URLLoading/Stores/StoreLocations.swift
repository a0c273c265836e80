public import Foundation

/// Where a default configuration keeps its persistent stores, following the
/// XDG base directories:
///
/// - the HTTP cache under `$XDG_CACHE_HOME/<app>/` (else `~/.cache/<app>/`);
/// - cookies and permanent credentials under `$XDG_DATA_HOME/<app>/`
///   (else `~/.local/share/<app>/`).
///
/// `<app>` is the application identifier, by default the executable's name.
/// Ephemeral sessions use none of these.
public struct StoreLocations: Sendable, Hashable, CustomStringConvertible {
    /// The directory holding the cache database and its body files.
    public var cacheDirectory: URL
    /// The directory holding the cookie and credential databases.
    public var dataDirectory: URL

    /// Locations given explicitly.
    ///
    /// - Parameters:
    ///   - cacheDirectory: Directory of the HTTP cache.
    ///   - dataDirectory: Directory of the cookie and credential stores.
    public init(cacheDirectory: URL, dataDirectory: URL) {
        self.cacheDirectory = cacheDirectory
        self.dataDirectory = dataDirectory
    }

    /// The XDG locations of an application's stores.
    ///
    /// - Parameters:
    ///   - applicationIdentifier: The folder name under the XDG directories.
    ///     Characters that cannot stand in one path component (`/`, NUL, a
    ///     leading `.`) are replaced by `_`.
    ///   - environment: The environment to read `XDG_CACHE_HOME`,
    ///     `XDG_DATA_HOME` and `HOME` from; the process's by default.
    public init(
        applicationIdentifier: String = StoreLocations.defaultApplicationIdentifier,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        let name = Self.pathComponent(applicationIdentifier)
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        // The XDG spec says relative paths in these variables are invalid and ignored.
        func base(_ variable: String, _ fallback: String) -> URL {
            if let value = environment[variable], value.hasPrefix("/") {
                return URL(fileURLWithPath: value, isDirectory: true)
            }
            return URL(fileURLWithPath: home, isDirectory: true).appendingPathComponent(fallback, isDirectory: true)
        }
        self.cacheDirectory = base("XDG_CACHE_HOME", ".cache").appendingPathComponent(name, isDirectory: true)
        self.dataDirectory = base("XDG_DATA_HOME", ".local/share").appendingPathComponent(name, isDirectory: true)
    }

    /// The running executable's name, the default application identifier.
    public static var defaultApplicationIdentifier: String {
        let name = (CommandLine.arguments.first.map { ($0 as NSString).lastPathComponent }) ?? ""
        return name.isEmpty ? "urlloading" : name
    }

    /// The cache database file.
    public var cacheDatabase: URL { cacheDirectory.appendingPathComponent("Cache.sqlite") }

    /// A description naming both directories.
    public var description: String {
        "StoreLocations(cache: \(cacheDirectory.path), data: \(dataDirectory.path))"
    }

    static func pathComponent(_ identifier: String) -> String {
        var scalars = identifier.unicodeScalars.map { scalar -> Character in
            scalar == "/" || scalar == "\0" ? "_" : Character(scalar)
        }
        if scalars.first == "." { scalars[0] = "_" }
        let name = String(scalars)
        return name.isEmpty ? "urlloading" : name
    }
}
