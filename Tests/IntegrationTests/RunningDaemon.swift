import FolioHarness
import FolioJSON
import Foundation
import Glibc
import Testing

/// A real `foliod` on a socket and data directory inside a temporary directory of its own.
///
/// Its stderr is appended to `foliod.log` there (across restarts), for failure messages.
/// Use one from one thread: the clients of a test share only `socketPath`.
final class RunningDaemon: @unchecked Sendable {
    let directory: String
    let dataDirectory: String
    let socketPath: String
    let logPath: String
    let arguments: [String]
    /// Variables added to foliod's environment at the next `start` (failpoints, LD_PRELOAD).
    var environment: [String: String] = [:]

    private var process: ChildProcess?

    init(directory: String, arguments: [String] = []) {
        self.directory = directory
        dataDirectory = directory + "/data"
        socketPath = directory + "/folio.sock"
        logPath = directory + "/foliod.log"
        self.arguments = arguments
    }

    var pid: Int32? { process?.processIdentifier }

    var isRunning: Bool { process?.isRunning ?? false }

    /// Everything foliod wrote to stderr so far.
    var log: String { fileText(logPath) }

    /// Starts foliod and waits until it answers `hello` on the socket.
    func start(timeout: Double = 30) throws {
        try Binaries.require()
        guard process == nil else { throw DaemonError("foliod is already running") }
        let logFD = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard logFD >= 0 else { throw DaemonError("cannot open \(logPath)") }
        defer { Glibc.close(logFD) }
        var environment = ProcessInfo.processInfo.environment
        environment["FOLIO_SOCKET"] = nil
        environment["FOLIO_DATA"] = nil
        environment["JOURNAL_STREAM"] = nil
        environment.merge(self.environment) { $1 }
        let nullDevice = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer { Glibc.close(nullDevice) }
        let process = try ChildProcess(
            executable: Binaries.foliod,
            // Tests back up anywhere in their directory, unless they set the backup directory themselves.
            arguments: ["--data", dataDirectory, "--socket", socketPath]
                + (arguments.contains("--backup-dir") ? [] : ["--backup-dir", directory]) + arguments,
            environment: environment, stdin: nullDevice, stdout: logFD, stderr: logFD)
        self.process = process

        let deadline = Date().addingTimeInterval(timeout)
        var lastProblem = "no attempt"
        while Date() < deadline {
            if !process.isRunning {
                self.process = nil
                throw DaemonError("foliod exited with status \(process.exitStatus) while starting; its log:\n\(log)")
            }
            do {
                let connection = try TestConnection(path: socketPath, timeout: 5)
                let hello = try connection.request(["op": "hello"])
                if hello.result?["server"] == "foliod" { return }
                lastProblem = "hello answered \(hello)"
            } catch {
                lastProblem = "\(error)"
            }
            usleep(20_000)
        }
        process.killAndWait()
        self.process = nil
        throw DaemonError("foliod did not answer hello within \(timeout) s (\(lastProblem)); its log:\n\(log)")
    }

    /// Sends SIGTERM and waits for the exit; returns the exit status (128 + signal if a signal ended
    /// it). If foliod does not exit within `timeout` s it is killed and this throws.
    @discardableResult
    func stop(timeout: Double = 30) throws -> Int32 {
        guard let process else { throw DaemonError("foliod is not running") }
        self.process = nil
        if !process.isRunning {
            throw DaemonError("foliod had already exited with status \(process.exitStatus); its log:\n\(log)")
        }
        kill(process.processIdentifier, SIGTERM)
        if !process.waitForExit(timeout: timeout) {
            process.killAndWait()
            throw DaemonError("foliod did not exit within \(timeout) s of SIGTERM; killed it. Its log:\n\(log)")
        }
        return process.exitStatus
    }

    /// Waits up to `timeout` s for foliod to exit on its own; its exit status (128 + signal if a
    /// signal ended it), or nil if it still runs.
    func waitForExit(timeout: Double) -> Int32? {
        guard let process, process.waitForExit(timeout: timeout) else { return nil }
        self.process = nil
        return process.exitStatus
    }

    /// `kill -9`: no chance to finish anything.
    func killHard() {
        guard let process else { return }
        self.process = nil
        if !process.killAndWait() { Issue.record("foliod \(process.processIdentifier) still runs 30 s after SIGKILL") }
    }

    /// Stops foliod with SIGTERM (expecting exit status 0) and starts it again on the same data
    /// directory and socket.
    func restart() throws {
        let status = try stop()
        guard status == 0 else { throw DaemonError("foliod exited with status \(status) on SIGTERM; its log:\n\(log)") }
        try start()
    }

    func connect(timeout: Double = 30) throws -> TestConnection {
        try TestConnection(path: socketPath, timeout: timeout)
    }

    /// Sends one request on a new connection.
    func request(_ request: JSON) throws -> JSON {
        try connect().request(request)
    }

    /// Ends whatever still runs: SIGTERM, then SIGKILL if it lingers. Records an issue if foliod had
    /// died on its own, which no test expects.
    func shutDown() {
        guard let process else { return }
        self.process = nil
        if !process.isRunning {
            Issue.record("foliod exited on its own with status \(process.exitStatus); its log:\n\(log)")
            return
        }
        kill(process.processIdentifier, SIGTERM)
        if !process.waitForExit(timeout: 15) {
            process.killAndWait()
            Issue.record("foliod did not exit within 15 s of SIGTERM; killed it. Its log:\n\(log)")
        } else if process.exitStatus != 0 {
            // Under a sanitizer, also what a leak or an error found at exit ends with.
            Issue.record("foliod exited with status \(process.exitStatus) on SIGTERM; its log:\n\(log)")
        }
    }

}

/// Runs `body` with a foliod started on a fresh temporary directory (`--data` and `--socket` inside
/// it, plus `arguments`); stops it and removes the directory afterwards, also when `body` throws.
@discardableResult
func withRunningDaemon<R>(arguments: [String] = [], _ body: (RunningDaemon) throws -> R) throws -> R {
    try withTemporaryDirectory { directory in
        let daemon = RunningDaemon(directory: directory, arguments: arguments)
        defer { daemon.shutDown() }
        try daemon.start()
        do {
            return try body(daemon)
        } catch {
            Issue.record("foliod log:\n\(daemon.log)")
            throw error
        }
    }
}
