// swift-tools-version:6.1
// Benchmarks, in a package of their own so that the library's users never
// build what only the benchmarks need. Run with `tools/bench`.
import PackageDescription

let package = Package(
    name: "URLLoadingBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "URLLoading", path: "../.."),
        // A reference client for `urlloading-bench session`.
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // The WebSocket echo server of `ws-echo` and `ws-100m` (already in the graph through AsyncHTTPClient).
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        // The reference OpenAPI transport of `openapi-get-16`.
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.0"),
        // `observed-get`'s tracer and metrics backend (already in the graph through URLLoading).
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        // `upload-resume-1g`'s server: Apple's side of resumable uploads (already in the graph through URLLoading's tests).
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    ],
    targets: [
        // The raw-SQLite reference: libsqlite3 straight, one table, one statement.
        .systemLibrary(name: "CSQLiteBench", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // The raw-libpq reference: the same statements on the same tables as our PostgreSQL cache.
        .systemLibrary(name: "CPostgresBench", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .executableTarget(
            name: "urlloading-bench",
            dependencies: [
                "CSQLiteBench",
                "CPostgresBench",
                .product(name: "URLLoading", package: "URLLoading"),
                .product(name: "URLLoadingPostgres", package: "URLLoading"),
                .product(name: "URLLoadingOpenAPI", package: "URLLoading"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOResumableUpload", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
