// swift-tools-version:6.0
// libFuzzer executables, one per fuzz target (fuzz/Harness holds what each checks). A package of its
// own because libFuzzer provides their `main`: built only by fuzz/build.sh, with
// `-sanitize=fuzzer,address`, never by the main package's `swift build`.
import PackageDescription

let targets = ["RequestDecoder", "JSONParser", "Query", "PageCursor", "ExportReader", "EventDecoder", "TreeRecord"]

let package = Package(
    name: "FolioFuzz",
    products: targets.map { .executable(name: "Fuzz\($0)", targets: ["Fuzz\($0)"]) },
    dependencies: [.package(name: "Folio", path: "..")],
    targets: [.target(name: "LibFuzzerDriver")]
        + targets.map {
            .executableTarget(
                name: "Fuzz\($0)", dependencies: ["LibFuzzerDriver", .product(name: "FolioFuzzing", package: "Folio")],
                swiftSettings: [.unsafeFlags(["-parse-as-library"])])
        }
)
