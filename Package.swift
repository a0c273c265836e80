// swift-tools-version:6.1
import PackageDescription

// Strict settings every target shares: Swift 6 language mode is the package
// default below; these keep the code honest about what it exposes.
let strictSwift: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "URLLoading",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "URLLoading", targets: ["URLLoading"]),
        // The fleet's stores on PostgreSQL: a product of its own,
        // so that users who do not need it never build libpq in.
        .library(name: "URLLoadingPostgres", targets: ["URLLoadingPostgres"]),
        // A transport for swift-openapi-generator's clients: a product of
        // its own, so that the core never builds swift-openapi-runtime.
        .library(name: "URLLoadingOpenAPI", targets: ["URLLoadingOpenAPI"]),
        .executable(name: "cachetool", targets: ["cachetool"]),
        .executable(name: "transferd", targets: ["transferd"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // HTTPRequest and HTTPResponse, the types server-side Swift speaks
        // (only its HTTPTypes library: 15 files, about 12 s of a debug build).
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        // Counters and timers in the process's metrics backend (only its
        // CoreMetrics library: 3 files; MetricsTestKit for the tests).
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        // A span per task in the process's tracer, its context in each
        // request (only Tracing and the two small modules under it;
        // InMemoryTracing for the tests).
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.0"),
        // Only URLLoadingOpenAPI's: `ClientTransport` and `HTTPBody`.
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.0"),
        // Test-only: the loopback origin in Tests/TestSupport.
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.30.0"),
        // Tests only: Apple's server side of resumable uploads (NIOResumableUpload).
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.0"),
        // Documentation only: `swift package generate-documentation --target URLLoading`.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // MARK: C system libraries
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // transferd seals the secrets its journal keeps (AES-256-GCM).
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // WebSocket permessage-deflate (RFC 7692).
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        // Stream tasks: TLS begun on an open connection (STARTTLS).
        .systemLibrary(
            name: "CTLS",
            pkgConfig: "libssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // Stream connections' loops: epoll and eventfd (headers only).
        .systemLibrary(name: "CEventPoll"),
        // Credentials: the desktop keyring (the Secret Service over D-Bus).
        // libsecret is loaded at run time, when a store first asks for the
        // keyring: building needs none of its (or GLib's) headers, and a
        // server that never uses it links none of it.
        .target(
            name: "CSecret",
            linkerSettings: [.linkedLibrary("dl")]
        ),
        // URLLoadingPostgres: the fleet's stores on PostgreSQL.
        .systemLibrary(
            name: "CPostgres",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),

        // MARK: Schema
        .target(
            name: "Migrations",
            dependencies: ["Storage"],
            path: "Migrations",
            exclude: ["README.md"],
            resources: [
                .embedInCode("0001_cache_create.sql"),
                .embedInCode("0002_cache_lru_by_id.sql"),
                .embedInCode("0003_cache_usage_watermark.sql"),
                .embedInCode("0001_cookies_create.sql"),
                .embedInCode("0002_cookies_rfc2965.sql"),
                .embedInCode("0001_credentials_create.sql"),
                .embedInCode("0001_transfers_create.sql"),
                .embedInCode("0002_transfers_launches.sql"),
                .embedInCode("0003_transfers_upload_resume.sql"),
            ],
            swiftSettings: strictSwift
        ),

        // MARK: Internal layers
        // The one lock type (see Lock.swift for why it is not Mutex itself).
        .target(
            name: "Locking",
            swiftSettings: strictSwift
        ),
        .target(
            name: "Storage",
            dependencies: [
                "CSQLite",
                "Locking",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift
        ),
        // libpq under a small synchronous layer, as Storage is over SQLite;
        // only URLLoadingPostgres uses it.
        .target(
            name: "Postgres",
            dependencies: ["CPostgres", "Storage"],
            swiftSettings: strictSwift
        ),
        .target(
            name: "Transport",
            dependencies: ["CCurl", "Locking"],
            swiftSettings: strictSwift
        ),
        // Stream tasks' connections: sockets on a few shared loops, TLS
        // through OpenSSL; the only code importing CTLS.
        .target(
            name: "Streams",
            dependencies: ["CTLS", "CZlib", "CEventPoll", "Locking"],
            swiftSettings: strictSwift
        ),

        // MARK: The library
        .target(
            name: "URLLoading",
            dependencies: [
                "Storage",
                "Transport",
                "Streams",
                "Migrations",
                "Locking",
                "CSecret",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strictSwift
        ),

        .target(
            name: "URLLoadingPostgres",
            dependencies: [
                "URLLoading", "Postgres", "Storage", "Locking",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift
        ),

        .target(
            name: "URLLoadingOpenAPI",
            dependencies: [
                "URLLoading",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            swiftSettings: strictSwift
        ),

        // The logic of transferd, the per-user process that carries out
        // background transfers: a target of its own so that its
        // state machine and journal are tested without the process.
        .target(
            name: "TransferDaemon",
            dependencies: [
                "URLLoading", "Storage", "Migrations", "Locking", "CCrypto",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift
        ),
        .executableTarget(
            name: "transferd",
            dependencies: [
                "TransferDaemon", "URLLoading",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSwift
        ),

        // MARK: Tools
        .executableTarget(
            name: "cachetool",
            dependencies: [
                "URLLoading", "URLLoadingPostgres", "TransferDaemon",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSwift
        ),

        // Turns URLSession code into ours by the porting article's table.
        .executableTarget(
            name: "port-urlsession",
            swiftSettings: strictSwift
        ),
        .plugin(
            name: "PortURLSession",
            capability: .buildTool(),
            dependencies: ["port-urlsession"]
        ),

        // MARK: Tests
        .target(
            name: "TestSupport",
            dependencies: [
                "Locking",
                "Postgres",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "NIOResumableUpload", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Tests/TestSupport",
            swiftSettings: strictSwift
        ),
        .executableTarget(
            name: "urlloading-test-helper",
            dependencies: [
                "Storage", "Migrations", "URLLoading", "URLLoadingPostgres", "URLLoadingOpenAPI", "TestSupport", "Locking",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            path: "Tests/TestHelper",
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "StorageTests",
            dependencies: ["Storage", "Migrations", "TestSupport", "Locking", "urlloading-test-helper"],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "URLLoadingTests",
            dependencies: [
                "URLLoading", "URLLoadingPostgres", "Postgres", "Storage", "Migrations", "Streams", "TestSupport", "Locking", "urlloading-test-helper",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "URLLoadingOpenAPITests",
            dependencies: [
                "URLLoadingOpenAPI", "URLLoading", "TestSupport", "Locking", "urlloading-test-helper",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "TransportTests",
            dependencies: ["Transport", "TestSupport", "Locking"],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "TestSupportTests",
            dependencies: ["TestSupport", "CCurl"],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "ConformanceTests",
            dependencies: ["URLLoading", "TestSupport", "Locking"],
            exclude: ["Results"],
            swiftSettings: strictSwift
        ),
        // Programs written with Apple's names (PortingTests/URLSessionSources),
        // ported at build time and run against the loopback origin. Plain
        // Swift 6 settings: the code is what a user of URLSession writes.
        .testTarget(
            name: "PortingTests",
            dependencies: [
                "URLLoading", "URLLoadingOpenAPI", "TestSupport",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            exclude: ["URLSessionSources"],
            plugins: ["PortURLSession"]
        ),
        .testTarget(
            name: "TransferDaemonTests",
            dependencies: ["TransferDaemon", "URLLoading", "TestSupport", "Locking", "transferd", "urlloading-test-helper"],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "cachetoolTests",
            dependencies: ["cachetool", "TestSupport", "URLLoading", "URLLoadingPostgres", "Postgres", "Storage", "urlloading-test-helper"],
            swiftSettings: strictSwift
        ),
    ],
    swiftLanguageModes: [.v6]
)
