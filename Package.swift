// swift-tools-version:6.0
import PackageDescription

/// The layers a request and a write run through are built for release without Swift's dynamic
/// exclusivity checks (`swift_beginAccess` on every access to a class's stored property, a global,
/// or a captured variable): 3.7% of a create's instructions, 6.1% of a create into five views, 2.6%
/// of a page of 20 (docs/BENCHMARKS.md, "Exclusivity checks left to debug builds"). Debug builds,
/// which every test runs, keep them, so an overlapping access still traps there.
let releaseWithoutExclusivityChecks: [SwiftSetting] = [
    .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))
]

let package = Package(
    name: "Folio",
    products: [
        .executable(name: "foliod", targets: ["foliod"]),
        .executable(name: "folio", targets: ["folio"]),
        .executable(name: "folio-bench", targets: ["folio-bench"]),
        .executable(name: "folio-chaos", targets: ["folio-chaos"]),
        // For the fuzzing package in fuzz/, which builds its libFuzzer executables on this.
        .library(name: "FolioFuzzing", targets: ["FolioFuzzing"]),
        // The Swift SDK: Codable records, typed queries, live queries over one multiplexed connection.
        .library(name: "FolioKit", targets: ["FolioKit"]),
    ],
    targets: [
        // C libraries from Debian packages, found with pkg-config.
        .systemLibrary(
            name: "CLMDB", pkgConfig: "lmdb", providers: [.apt(["liblmdb-dev"])]),
        .systemLibrary(
            name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // SQLite, the peer `make bench` runs beside Redis; only folio-bench links it.
        .systemLibrary(
            name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // libpq, PostgreSQL's client library: the shared log of cluster mode (docs/CLUSTER.md).
        .systemLibrary(
            name: "CPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // Linux syscalls Glibc does not export to Swift (epoll, eventfd, SO_PEERCRED, O_DIRECT).
        .target(name: "CFolioSystem", cSettings: [.unsafeFlags(["-gdwarf-4"])]),

        // Named points where debug builds can be made to crash or fail (FOLIO_FAILPOINTS); empty in
        // release builds.
        .target(name: "Failpoints"),
        // LMDB binding: knows nothing of JSON or Folio.
        .target(
            name: "LMDB", dependencies: ["CLMDB", "CFolioSystem", "Failpoints"],
            swiftSettings: releaseWithoutExclusivityChecks),
        // Byte kernels of the pure layers (JSON string scans, base64), AVX2 where the CPU has it: no I/O.
        // Debug information in DWARF 4, like Swift's: valgrind (bench/instructions.sh) gives up on a
        // binary with two C units in clang's DWARF 5.
        .target(name: "CFolioKernels", cSettings: [.unsafeFlags(["-gdwarf-4"])]),
        // Pure layers: no platform I/O.
        .target(
            name: "FolioJSON", dependencies: ["CFolioKernels"], swiftSettings: releaseWithoutExclusivityChecks,
            linkerSettings: [.linkedLibrary("m")]),
        .target(
            name: "FolioModel", dependencies: ["FolioJSON", "CFolioKernels"],
            swiftSettings: releaseWithoutExclusivityChecks, linkerSettings: [.linkedLibrary("m")]),
        // Event log, current state, views, replay: LMDB, no sockets.
        .target(
            name: "FolioStore",
            dependencies: ["LMDB", "FolioModel", "FolioJSON", "CCrypto", "CFolioSystem", "Failpoints"],
            swiftSettings: releaseWithoutExclusivityChecks),
        // Wire messages and codec: pure.
        .target(
            name: "FolioProtocol", dependencies: ["FolioModel", "FolioJSON"],
            swiftSettings: releaseWithoutExclusivityChecks),
        // A blocking client of the socket protocol (CLI, benchmark, tests).
        .target(name: "FolioClient", dependencies: ["FolioProtocol", "FolioJSON", "CFolioSystem"]),
        // Cluster mode: the log on PostgreSQL (libpq), proposals checked and numbered there, the tailer
        // that applies it to a node's store. Knows the store and libpq, nothing of sockets.
        .target(name: "FolioCluster", dependencies: ["CPQ", "FolioStore", "FolioModel", "FolioJSON", "CFolioSystem"]),
        // Sockets, connections, the writer: wires store and protocol.
        .target(
            name: "FolioServer",
            dependencies: [
                "FolioStore", "FolioCluster", "FolioProtocol", "FolioModel", "FolioJSON", "LMDB", "CFolioSystem",
                "Failpoints",
            ],
            swiftSettings: releaseWithoutExclusivityChecks),

        // The Swift SDK (async/await client). FolioJSON, FolioModel and CFolioSystem stay internal to it: its public
        // API speaks Codable and Swift types only.
        .target(name: "FolioKit", dependencies: ["FolioJSON", "FolioModel", "FolioProtocol", "CFolioSystem"]),
        // The SDK's example: the ParseSwift seed's to-do flow against a running foliod.
        .executableTarget(name: "TodoList", dependencies: ["FolioKit"], path: "Examples/TodoList"),
        // Times `get` through FolioKit against raw lines on one connection (`make bench-sdk`).
        .executableTarget(
            name: "foliokit-bench", dependencies: ["FolioKit", "CFolioSystem"], path: "bench/foliokit-bench"),

        // Command-line parsing shared by the executables.
        .target(name: "FolioCommandLine"),
        // What the programs and tests that drive foliod share: child processes, seeded randomness.
        .target(name: "FolioHarness", dependencies: ["CFolioSystem"]),

        .executableTarget(
            name: "foliod",
            dependencies: ["FolioServer", "FolioStore", "FolioModel", "FolioProtocol", "FolioJSON", "FolioCommandLine"]),
        .executableTarget(
            name: "folio",
            dependencies: ["FolioClient", "FolioProtocol", "FolioModel", "FolioJSON", "FolioCommandLine"]),
        .executableTarget(
            name: "folio-bench",
            dependencies: ["FolioClient", "FolioJSON", "CFolioSystem", "CSQLite", "FolioCommandLine", "FolioHarness"]),
        // The crash loop: kills foliod at random moments and checks the store against the history.
        .executableTarget(
            name: "folio-chaos",
            dependencies: ["FolioClient", "FolioJSON", "CCrypto", "CFolioSystem", "FolioCommandLine", "FolioHarness"]),

        // The fuzz targets' properties, shared by the libFuzzer executables (fuzz/Package.swift) and the
        // replay of fuzz/regressions in FuzzRegressionTests.
        .target(
            name: "FolioFuzzing", dependencies: ["FolioProtocol", "FolioStore", "FolioModel", "FolioJSON"],
            path: "fuzz/Harness"),

        .testTarget(name: "LMDBTests", dependencies: ["LMDB"]),
        .testTarget(name: "FolioJSONTests", dependencies: ["FolioJSON"]),
        .testTarget(name: "FolioModelTests", dependencies: ["FolioModel", "FolioJSON", "FolioHarness"]),
        .testTarget(
            name: "FolioStoreTests", dependencies: ["FolioStore", "FolioModel", "FolioJSON", "LMDB", "CFolioSystem"]),
        .testTarget(name: "FolioChaosTests", dependencies: ["folio-chaos", "FolioJSON"]),
        .testTarget(name: "FolioProtocolTests", dependencies: ["FolioProtocol", "FolioModel", "FolioJSON"]),
        .testTarget(name: "FolioServerTests", dependencies: ["FolioServer", "CFolioSystem", "FolioHarness"]),
        .testTarget(name: "FuzzRegressionTests", dependencies: ["FolioFuzzing"]),
        .testTarget(name: "FolioKitTests", dependencies: ["FolioKit", "FolioJSON", "FolioHarness"]),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "FolioClient", "FolioProtocol", "FolioJSON", "LMDB", "CFolioSystem", "FolioStore", "FolioModel",
                "FolioHarness",
                "FolioCluster",
            ]),
    ]
)
