import CFolioSystem
import Foundation
import Glibc

/// One run of an executable to its end: exit status and everything it wrote. stdout and stderr are
/// pipes, as in a shell pipeline.
public struct CommandRun: CustomStringConvertible {
    public let arguments: [String]
    /// The exit status, or 128 + the signal number if a signal ended it.
    public let status: Int32
    public let stdout: String
    public let stderr: String

    public var description: String {
        "`\(arguments.joined(separator: " "))` exited \(status)\nstdout: \(stdout)\nstderr: \(stderr)"
    }

    /// stdout as JSON lines.
    public var jsonLines: [String] { stdout.split(separator: "\n").map(String.init) }

    /// Runs `executable` with `arguments`, `input` on its stdin (nothing by default); kills it and
    /// throws if it runs longer than `timeout` seconds.
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], input: [UInt8]? = nil,
        timeout: Double = 30
    ) throws -> CommandRun {
        var merged = ProcessInfo.processInfo.environment
        merged["FOLIO_SOCKET"] = nil
        merged["FOLIO_DATA"] = nil
        for (key, value) in environment { merged[key] = value }
        var output: [Int32] = [0, 0]
        var errors: [Int32] = [0, 0]
        guard folio_pipe(&output) == 0, folio_pipe(&errors) == 0 else { throw HarnessError("pipe2 failed") }
        let nullDevice = try input.map(inputFile) ?? open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer { Glibc.close(nullDevice) }
        let process: ChildProcess
        do {
            process = try ChildProcess(
                executable: executable, arguments: arguments, environment: merged, stdin: nullDevice, stdout: output[1],
                stderr: errors[1])
        } catch {
            for fd in output + errors { Glibc.close(fd) }
            throw error
        }
        Glibc.close(output[1])
        Glibc.close(errors[1])
        defer {
            Glibc.close(output[0])
            Glibc.close(errors[0])
        }
        // Both pipes until both ends close, or the time is up.
        var texts: [[UInt8]] = [[], []]
        var open = [true, true]
        let deadline = Date().addingTimeInterval(timeout)
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while open.contains(true) {
            guard Date() < deadline else {
                process.killAndWait()
                throw HarnessError(
                    "`\(([executable] + arguments).joined(separator: " "))` did not finish within \(timeout) s; killed it"
                )
            }
            var fds = [output[0], errors[0]].enumerated().filter { open[$0.offset] }.map {
                pollfd(fd: $0.element, events: Int16(POLLIN), revents: 0)
            }
            guard poll(&fds, nfds_t(fds.count), 100) >= 0 || errno == EINTR else { throw HarnessError("poll failed") }
            for entry in fds where entry.revents != 0 {
                let index = entry.fd == output[0] ? 0 : 1
                let count = chunk.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
                if count > 0 {
                    texts[index] += chunk[..<count]
                } else if count == 0 || errno != EINTR {
                    open[index] = false
                }
            }
        }
        if !process.waitForExit(timeout: max(1, deadline.timeIntervalSinceNow)) {
            process.killAndWait()
            throw HarnessError("`\(executable)` closed its output but did not exit; killed it")
        }
        let outputText = texts[0]
        let errorText = texts[1]
        return CommandRun(
            arguments: [executable] + arguments, status: process.exitStatus,
            stdout: String(decoding: outputText, as: UTF8.self), stderr: String(decoding: errorText, as: UTF8.self))
    }

    /// A deleted temporary file holding `bytes`, open for reading from its start.
    private static func inputFile(_ bytes: [UInt8]) throws -> Int32 {
        var template = Array("/tmp/folio-input-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw HarnessError("mkstemp failed") }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, bytes.count - written) }
            guard count > 0 else {
                Glibc.close(fd)
                throw HarnessError("writing the input failed")
            }
            written += count
        }
        lseek(fd, 0, SEEK_SET)
        return fd
    }
}
