// swift-tools-version:6.0
// settle: marketplace settlement on Stripe. The stages a batch flows through are
// modules: read → core (rules, plan) → write, and apply (ledger + HTTP). C libraries
// sit in their own system-library targets and are imported only by the module that
// wraps them.
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    // Release builds skip dynamic exclusivity checks: they cost ~15 % of a large plan
    // (every access to a class's stored array), and the static checks still apply.
    .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release)),
]

let package = Package(
    name: "settle",
    products: [
        .executable(name: "settle", targets: ["settle"]),
        .executable(name: "settle-gen", targets: ["settle-gen"]),
    ],
    targets: [
        // C libraries from Debian, through pkg-config.
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", pkgConfig: "zlib",
                       providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CLibXML2", path: "Sources/CLibXML2", pkgConfig: "libxml-2.0",
                       providers: [.apt(["libxml2-dev"])]),
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CCrypto", path: "Sources/CCrypto", pkgConfig: "libcrypto",
                       providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        // prctl and setrlimit for the executable's hardening (no core dumps).
        .systemLibrary(name: "CProcess", path: "Sources/CProcess"),
        // __builtin_prefetch for the symbol table's look-ups (a header, no library).
        .systemLibrary(name: "CPrefetch", path: "Sources/CPrefetch"),
        // O_DIRECT for the output files (a header, no library).
        .systemLibrary(name: "CDirectIO", path: "Sources/CDirectIO"),

        // SHA-256 on libcrypto: instruction ids and file checksums.
        .target(name: "SettleDigest", dependencies: ["CCrypto"], swiftSettings: strict),
        // Pure: money, the line model, the rules, instruction forming. No I/O.
        .target(name: "SettleCore", dependencies: ["SettleDigest", "CPrefetch"], swiftSettings: strict),
        // Readers: gzip, CSV, XML (streaming, validated) → records for the rules.
        .target(name: "SettleRead", dependencies: ["SettleCore", "SettleDigest", "CZlib", "CLibXML2"],
                swiftSettings: strict),
        // Writers: results, errors, deferred, instructions, summary, manifest.
        .target(name: "SettleWrite", dependencies: ["SettleCore", "SettleDigest", "CDirectIO"], swiftSettings: strict),
        // The plan folder's contract (docs/PLAN-FORMAT.md) for plan and apply alike: layout,
        // manifest and seals, instructions.jsonl written and read, the outcome files' rewrite.
        .target(name: "SettlePlanFolder",
                dependencies: ["SettleCore", "SettleDigest", "SettleRead", "SettleWrite", "SettleLedger",
                               "SettleApply", "CDirectIO"],
                swiftSettings: strict),
        // The SQLite ledger that makes every line settle at most once.
        .target(name: "SettleLedger", dependencies: ["CSQLite"], swiftSettings: strict),
        // HTTP on libcurl's multi interface.
        .target(name: "SettleHTTP", dependencies: ["CCurl"], swiftSettings: strict),
        // Executing a plan against Stripe exactly once.
        .target(name: "SettleApply",
                dependencies: ["SettleCore", "SettleLedger", "SettleHTTP"],
                swiftSettings: strict),
        // Commands, options, config, exit codes.
        .target(name: "SettleCLI",
                dependencies: ["SettleCore", "SettleRead", "SettleWrite", "SettleLedger",
                               "SettleApply", "SettlePlanFolder"],
                swiftSettings: strict),
        .executableTarget(name: "settle", dependencies: ["SettleCLI", "CProcess"], swiftSettings: strict),
        // Developer tool: deterministic synthetic exports for benchmarks and load tests.
        .executableTarget(name: "settle-gen", dependencies: ["CZlib"], path: "Sources/SettleGen",
                          swiftSettings: strict),

        // SettleRead too: the property tests feed generated CSV through the real reader.
        .testTarget(name: "SettleCoreTests", dependencies: ["SettleCore", "SettleDigest", "SettleRead", "SettleTestSupport"],
                    swiftSettings: strict),
        .testTarget(name: "SettleReadTests", dependencies: ["SettleRead", "SettleCore", "SettleTestSupport"],
                    resources: [.copy("Fixtures")], swiftSettings: strict),
        .testTarget(name: "SettleWriteTests", dependencies: ["SettleWrite", "SettleCore", "SettleTestSupport"], swiftSettings: strict),
        .testTarget(name: "SettlePlanFolderTests",
                    dependencies: ["SettlePlanFolder", "SettleApply", "SettleCore", "SettleWrite", "SettleLedger", "SettleTestSupport",
                                   "CDirectIO"],
                    swiftSettings: strict),
        .testTarget(name: "SettleCLITests", dependencies: ["SettleCLI", "SettleWrite", "SettleLedger", "SettleCore", "SettleTestSupport"], swiftSettings: strict),
        .testTarget(name: "SettleLedgerTests", dependencies: ["SettleLedger"],
                    swiftSettings: strict),
        .testTarget(name: "SettleHTTPTests", dependencies: ["SettleHTTP", "SettleTestSupport"],
                    swiftSettings: strict),
        // The Stripe sandbox in a child process, for the integration and end-to-end tests.
        .target(name: "SettleTestSupport", dependencies: ["SettleHTTP", "SettleCore"], path: "Tests/SettleTestSupport",
                swiftSettings: strict),
        .testTarget(name: "SettleApplyTests", dependencies: ["SettleApply", "SettleCore", "SettleLedger", "SettleHTTP", "SettleWrite", "SettleTestSupport"],
                    swiftSettings: strict),
        .testTarget(name: "SettleEndToEndTests", dependencies: ["SettleTestSupport", "SettleLedger"],
                    resources: [.copy("Fixtures")], swiftSettings: strict),
    ]
)
