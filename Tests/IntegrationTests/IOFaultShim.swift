import FolioHarness
import Foundation

/// The LD_PRELOAD library of Tests/Faults/iofault.c, built into a test's own directory, and its
/// control file: makes chosen file system calls of foliod fail (see the C file for the rules).
struct IOFaultShim {
    let library: String
    let controlPath: String
    let logPath: String

    /// One fault: `calls` (`write`, `fdatasync`, `sync`, `ftruncate`, `open`, …, comma-separated)
    /// on files under `path` fail from the `nth` such call on, with `error`, once or from then on.
    struct Fault: CustomStringConvertible {
        var calls: String
        var nth: Int
        var error: String
        var sticky: Bool
        var path: String
        /// Only writes starting at or past this offset, and below `below`, count.
        var from: Int?
        var below: Int?

        var description: String {
            var line = "\(calls) \(nth) \(error) \(sticky ? "sticky" : "once") \(path)"
            if let from { line += " from=\(from)" }
            if let below { line += " below=\(below)" }
            return line
        }
    }

    private static let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Faults/iofault.c").path

    /// Compiles the library into `directory` with the first of `cc`, `gcc` and `clang` on the PATH
    /// (the Swift toolchain brings clang).
    init(in directory: String) throws {
        library = directory + "/iofault.so"
        controlPath = directory + "/iofault.control"
        logPath = directory + "/iofault.log"
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":")
        let compiler = ["cc", "gcc", "clang"].lazy.flatMap { name in path.lazy.map { "\($0)/\(name)" } }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let compiler else { throw DaemonError("no C compiler on the PATH to build \(Self.source)") }
        let build = try CommandRun.run(
            compiler, ["-shared", "-fPIC", "-O2", "-o", library, Self.source, "-ldl"], timeout: 60)
        guard build.status == 0 else { throw DaemonError("building the I/O fault library failed: \(build)") }
        try clear()
    }

    /// What foliod's environment needs for the library to act.
    var environment: [String: String] {
        ["LD_PRELOAD": library, "IOFAULT_CONTROL": controlPath, "IOFAULT_LOG": logPath]
    }

    /// Puts `faults` in force (and restarts their counts), replacing any before.
    func set(_ faults: [Fault]) throws {
        let draft = controlPath + ".new"
        try faults.map(\.description).joined(separator: "\n").appending("\n").write(
            toFile: draft, atomically: false, encoding: .utf8)
        guard rename(draft, controlPath) == 0 else { throw DaemonError("cannot rename \(draft)") }
    }

    func set(_ fault: Fault) throws { try set([fault]) }

    /// Clears every fault.
    func clear() throws { try set([]) }

    /// The failures injected so far, one line each (`<call> <errno> <path>`).
    var injected: [String] {
        fileText(logPath).split(separator: "\n").map(String.init)
    }
}
