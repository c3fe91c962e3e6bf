// swift-tools-version:6.1
import PackageDescription

// The reference cloud receiver for doorbell-agent. Layers, inside out:
//   CloudCore    pure: Standard Webhooks signature checks (v1 HMAC-SHA256, v1a Ed25519),
//                timestamp tolerance, event body validation. No I/O.
//   CloudStore   accounts, gateways, doorbells, shares, phones, events and deliveries, in SQLite
//                (C API via CSQLite, on a thread of its own, one session at a time) or PostgreSQL
//                (postgres-nio: a pool of non-blocking connections): the same SQL for both, and an
//                async API that never blocks a thread serving requests.
//   CloudPush    APNs: provider JWT, payloads, the HTTP/2 client (AsyncHTTPClient), the fan-out worker
//                (on threads of its own at a lower priority than the request threads).
//   CloudServer  the HTTPS endpoints (Hummingbird 2), wiring the layers together.
//   doorbell-cloud  the command line (`serve`, `events`).
let package = Package(
    name: "doorbell-cloud",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "doorbell-cloud", targets: ["doorbell-cloud"]),
        .executable(name: "cloud-fuzz", targets: ["cloud-fuzz"]),
    ],
    dependencies: [
        // traits: [] drops Hummingbird's swift-configuration integration, which we don't use.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        // HTTP/2 to APNs: many concurrent streams on one TLS connection.
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // PostgreSQL without blocking a thread: a pool of NIO connections (PostgresClient).
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .target(
            name: "CloudCore",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .target(
            name: "CloudStore",
            dependencies: [
                "CloudCore",
                "CSQLite",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "CloudPush",
            dependencies: [
                "CloudCore",
                "CloudStore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "CloudServer",
            dependencies: [
                "CloudCore",
                "CloudStore",
                "CloudPush",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "doorbell-cloud",
            dependencies: [
                "CloudCore",
                "CloudStore",
                "CloudServer",
                "CloudPush",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Fuzz targets for the parsers of outside input (scripts/fuzz.sh; `make test` replays the corpus).
        .systemLibrary(name: "CFuzzDriver"),
        .executableTarget(name: "cloud-fuzz", dependencies: ["CloudCore", "CFuzzDriver"]),
        .testTarget(
            name: "CloudCoreTests",
            dependencies: [
                "CloudCore",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "CloudStoreTests",
            dependencies: ["CloudCore", "CloudStore"]
        ),
        .testTarget(
            name: "CloudPushTests",
            dependencies: [
                "CloudCore",
                "CloudStore",
                "CloudPush",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "CloudServerTests",
            dependencies: [
                "CloudCore",
                "CloudStore",
                "CloudServer",
                "CloudPush",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ]
        ),
    ]
)
