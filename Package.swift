// swift-tools-version:6.1
import PackageDescription

// Release builds of the agent (its package, the image, make bench) keep the code a gateway runs
// while idle together: our modules' functions each in a section of their own, laid out by
// packaging/doorbell-agent.order (scripts/footprint/make-order-file.sh), since on each fault the
// kernel also maps the file's cached neighbours (64 KiB); and relative relocations packed (RELR,
// glibc 2.36: 4.6 KB read at start-up instead of 571 KB). Idle VmRSS 19.4 → 16.8-17.0 MiB
// (docs/benchmarks.md, "Code laid out by use"; scripts/test-deb.sh checks the RELR part).
let release = BuildSettingCondition.when(platforms: [.linux], configuration: .release)
let functionSections: [SwiftSetting] = [.unsafeFlags(["-Xfrontend", "-function-sections"], release)]
let codeLayout: [LinkerSetting] = [.unsafeFlags([
    "-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
    "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/packaging/doorbell-agent.order",
    "-Xlinker", "--no-warn-symbol-ordering",
], release)]

// The agent: a pure core (frames → events, signing, config), thin shells around C libraries
// (libcurl, libcrypto, sqlite3, libgpiod, libmosquitto) and the OS, and two small executables. No SwiftNIO here on purpose.
let package = Package(
    name: "doorbell-agent",
    products: [
        .executable(name: "doorbell-agent", targets: ["doorbell-agent"]),
        .executable(name: "agentctl", targets: ["agentctl"]),
        .executable(name: "doorbell-fuzz", targets: ["doorbell-fuzz"]),
        .executable(name: "doorbell-bench", targets: ["doorbell-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
    ],
    targets: [
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        // libcrypto (OpenSSL 3), already in the process through libcurl's TLS.
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto",
                       providers: [.apt(["libssl-dev"])]),
        // libgpiod 1.6 or 2.x (whichever gpiod.h the build sees) behind one small C face.
        .target(name: "CGPIOD", linkerSettings: [.linkedLibrary("gpiod")]),
        // The MQTT sink (the house's broker, Home Assistant).
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto",
                       providers: [.apt(["libmosquitto-dev"])]),
        // BlueZ's library and headers for the kernel HCI socket (libbluetooth-dev).
        .target(name: "CBluetooth", linkerSettings: [.linkedLibrary("bluetooth")]),
        // libc's Linux-only corners that Glibc's module map leaves out (adjtimex).
        .systemLibrary(name: "CLinux"),
        // pipe2/accept4 and posix_spawn's closefrom: descriptors close-on-exec from birth (_GNU_SOURCE).
        .target(name: "CDescriptors"),
        .target(
            name: "DoorbellCore",
            dependencies: [
                "CCrypto",
            ],
            swiftSettings: functionSections
        ),
        .target(
            name: "DoorbellRuntime",
            dependencies: [
                "DoorbellCore", "CCurl", "CSQLite", "CLinux", "CDescriptors", "CGPIOD", "CMosquitto", "CBluetooth",
            ],
            swiftSettings: functionSections
        ),
        .executableTarget(
            name: "doorbell-agent",
            // No ArgumentParser: its Foundation would be ≈ 3 MiB of every gateway's binary.
            dependencies: ["DoorbellCore", "DoorbellRuntime"],
            swiftSettings: functionSections,
            linkerSettings: codeLayout
        ),
        .executableTarget(
            name: "agentctl",
            dependencies: [
                "DoorbellCore", "DoorbellRuntime",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Fuzz targets (scripts/fuzz.sh builds them with libFuzzer) and, in a normal build,
        // the replayer of the saved corpus and crash reproducers.
        .executableTarget(name: "doorbell-fuzz", dependencies: ["DoorbellCore", "CLinux"]),
        .executableTarget(name: "doorbell-bench", dependencies: ["DoorbellCore", "DoorbellRuntime"]),
        .testTarget(
            name: "DoorbellCoreTests",
            dependencies: [
                "DoorbellCore",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "DoorbellRuntimeTests",
            dependencies: [
                "DoorbellCore", "DoorbellRuntime", "CSQLite",
            ]
        ),
    ]
)
