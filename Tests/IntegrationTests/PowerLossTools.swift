import FolioHarness
import Foundation
import Glibc

/// The power-loss shim (Tests/Faults/powerloss.c) and image builder (powerloss_image.c), built into
/// a test's own directory, and a data directory beside them: `run` performs a Python script's file
/// calls under the shim, `image` rebuilds what a power loss could leave of them.
struct PowerLossTools {
    let directory: String
    let shim: String
    let imageTool: String
    /// The tracked directory; `base` holds its files as they were before the first `run`.
    var data: String { directory + "/data" }
    var base: String { directory + "/base" }
    var log: String { directory + "/log" }

    private static let faults = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Faults").path

    /// Compiles both with the first of `cc`, `gcc` and `clang` on the PATH, and makes `data` and `base`
    /// with the same `files`.
    init(in directory: String, files: [String: [UInt8]] = [:]) throws {
        self.directory = directory
        shim = directory + "/powerloss.so"
        imageTool = directory + "/powerloss_image"
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":")
        let compiler = ["cc", "gcc", "clang"].lazy.flatMap { name in path.lazy.map { "\($0)/\(name)" } }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let compiler else { throw DaemonError("no C compiler on the PATH to build \(Self.faults)") }
        for arguments in [
            ["-shared", "-fPIC", "-O2", "-o", shim, Self.faults + "/powerloss.c", "-ldl"],
            ["-O2", "-o", imageTool, Self.faults + "/powerloss_image.c"],
        ] {
            let build = try CommandRun.run(compiler, arguments, timeout: 60)
            guard build.status == 0 else { throw DaemonError("building the power-loss tools failed: \(build)") }
        }
        for place in [data, base] {
            try FileManager.default.createDirectory(atPath: place, withIntermediateDirectories: true)
            for (name, bytes) in files { try Data(bytes).write(to: URL(fileURLWithPath: place + "/" + name)) }
        }
    }

    /// Runs `script` (Python; `D` is the data directory's path) under the shim.
    func run(_ script: String) throws {
        let program = "import os, ctypes\nD = \(String(reflecting: data))\n" + script
        let run = try CommandRun.run(
            "/usr/bin/env", ["python3", "-c", program],
            environment: ["LD_PRELOAD": shim, "POWERLOSS_LOG": log, "POWERLOSS_PREFIX": data + "/"], timeout: 60)
        guard run.status == 0 else { throw DaemonError("the script failed: \(run)") }
    }

    /// One image: each file's bytes by name, and powerloss_image's line. Throws if it fails.
    func image(seed: UInt64, style: String = "uniform", unit: Int = 4096, namesNeedDirectorySync: Bool = false)
        throws -> (files: [String: [UInt8]], summary: String)
    {
        let run = try imageRun(seed: seed, style: style, unit: unit, namesNeedDirectorySync: namesNeedDirectorySync)
        guard run.status == 0 else { throw DaemonError("powerloss_image failed: \(run)") }
        var files: [String: [UInt8]] = [:]
        let out = directory + "/out-\(seed)"
        defer { try? FileManager.default.removeItem(atPath: out) }
        for name in try FileManager.default.contentsOfDirectory(atPath: out) {
            files[name] = try fileContents(out + "/" + name)
        }
        return (files, run.stdout)
    }

    /// powerloss_image run on `base` and the log, with `--check` against `data`.
    func imageRun(seed: UInt64, style: String = "uniform", unit: Int = 4096, namesNeedDirectorySync: Bool = false)
        throws
        -> CommandRun
    {
        let out = directory + "/out-\(seed)"
        try? FileManager.default.removeItem(atPath: out)
        var arguments = ["--seed", "\(seed)", "--style", style, "--unit", "\(unit)", "--check", data]
        if namesNeedDirectorySync { arguments.append("--names-need-dirsync") }
        return try CommandRun.run(imageTool, arguments + [base, log, out], timeout: 60)
    }

    /// Images for seeds 1 ... `count`.
    func images(_ count: Int, style: String = "uniform", unit: Int = 4096, namesNeedDirectorySync: Bool = false) throws
        -> [[String: [UInt8]]]
    {
        try (1...UInt64(count)).map {
            try image(seed: $0, style: style, unit: unit, namesNeedDirectorySync: namesNeedDirectorySync).files
        }
    }
}
