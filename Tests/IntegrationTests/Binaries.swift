import Foundation

/// The built `foliod` and `folio` (and `folio-bench`): found in the nearest directory above the running test executable
/// that holds both (SwiftPM puts them next to the test bundle, in `<scratch>/<triple>/debug/`).
/// `FOLIO_BIN_DIR` names the directory explicitly.
enum Binaries {
    static let directory: String? = locate()

    static var foliod: String { (directory ?? "/nonexistent") + "/foliod" }
    static var folio: String { (directory ?? "/nonexistent") + "/folio" }
    static var folioChaos: String { (directory ?? "/nonexistent") + "/folio-chaos" }
    /// Built with them by `swift build`; its absence fails only the tests that run it.
    static var folioBench: String { (directory ?? "/nonexistent") + "/folio-bench" }

    /// Throws a readable error when the binaries were not found, so a test fails saying so.
    static func require() throws {
        guard directory != nil else {
            throw DaemonError(
                "cannot find the foliod and folio binaries above \(executablePath); build them, or set FOLIO_BIN_DIR")
        }
    }

    private static var executablePath: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    private static func locate() -> String? {
        let files = FileManager.default
        if let explicit = ProcessInfo.processInfo.environment["FOLIO_BIN_DIR"], !explicit.isEmpty { return explicit }
        var directory = URL(fileURLWithPath: executablePath).resolvingSymlinksInPath().deletingLastPathComponent()
        while directory.path != "/" {
            let path = directory.path
            if files.isExecutableFile(atPath: path + "/foliod") && files.isExecutableFile(atPath: path + "/folio") {
                return path
            }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }
}
