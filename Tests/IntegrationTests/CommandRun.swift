import Foundation
import Glibc

/// One run of an executable to its end: exit status and everything it wrote. stdout and stderr are
/// pipes, as in a shell pipeline.
struct CommandRun: CustomStringConvertible {
    let arguments: [String]
    /// The exit status, or 128 + the signal number if a signal ended it.
    let status: Int32
    let stdout: String
    let stderr: String

    var description: String {
        "`\(arguments.joined(separator: " "))` exited \(status)\nstdout: \(stdout)\nstderr: \(stderr)"
    }

    /// stdout as JSON lines.
    var jsonLines: [String] { stdout.split(separator: "\n").map(String.init) }

    /// Runs `executable` with `arguments`; kills it and throws if it runs longer than `timeout` seconds.
    static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], timeout: Double = 30
    ) throws -> CommandRun {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var merged = ProcessInfo.processInfo.environment
        merged["FOLIO_SOCKET"] = nil
        merged["FOLIO_DATA"] = nil
        for (key, value) in environment { merged[key] = value }
        process.environment = merged
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        let outputText = Locked(Data())
        let errorText = Locked(Data())
        let readers = DispatchGroup()
        for (pipe, sink) in [(output, outputText), (errors, errorText)] {
            let handle = pipe.fileHandleForReading
            DispatchQueue.global().async(group: readers) {
                let data = handle.readDataToEndOfFile()
                sink.withLock { $0 = data }
            }
        }
        try process.run()
        if !process.waitForExit(timeout: timeout) {
            process.killAndWait()
            throw DaemonError(
                "`\(([executable] + arguments).joined(separator: " "))` did not finish within \(timeout) s; killed it")
        }
        if readers.wait(timeout: .now() + 10) == .timedOut {
            throw DaemonError("the output pipes of `\(executable)` stayed open after it exited")
        }
        return CommandRun(
            arguments: [executable] + arguments, status: process.exitStatus,
            stdout: String(decoding: outputText.current, as: UTF8.self),
            stderr: String(decoding: errorText.current, as: UTF8.self))
    }
}
