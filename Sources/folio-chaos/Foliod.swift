import CFolioSystem
import FolioClient
import FolioHarness
import FolioJSON
import Foundation
import Glibc

/// The foliod under test: started as a child on one data directory and socket, killed with
/// SIGKILL, started again. Its stderr goes to `logPath`, through a pump that notices map growth.
final class Foliod: @unchecked Sendable {
    let binary: String
    let dataDirectory: String
    let socketPath: String
    let logPath: String
    let mapSize: Int
    let durability: String
    /// More arguments for foliod (`--foliod-arg`).
    let extraArguments: [String]
    /// With `--power-loss`: each start begins a record log, each kill is a power loss.
    let powerLoss: PowerLoss?
    /// Where the workload's backups go: foliod writes backups below its backup-dir only.
    let backupDirectory: String
    /// Signalled once for every time foliod logs that it grew the map.
    let mapGrowths = DispatchSemaphore(value: 0)

    private var process: ChildProcess?
    private var pump: LogPump?

    init(
        binary: String, directory: String, mapSize: Int, durability: String, extraArguments: [String] = [],
        powerLoss: PowerLoss.Options? = nil, seed: UInt64 = 0
    ) {
        let dataDirectory = directory + "/data"
        self.durability = durability
        self.extraArguments = extraArguments
        self.binary = binary
        self.dataDirectory = dataDirectory
        backupDirectory = directory + "/backups"
        socketPath = directory + "/folio.sock"
        logPath = directory + "/foliod.log"
        self.mapSize = mapSize
        self.powerLoss = powerLoss.map {
            PowerLoss(options: $0, dataDirectory: dataDirectory, directory: directory + "/powerloss", seed: seed)
        }
    }

    var pid: pid_t? { process?.processIdentifier }

    /// Starts the process without waiting for it to serve.
    func spawn() throws(DriverError) {
        precondition(process == nil, "foliod is already running")
        try powerLoss?.begin()
        var pipe: [Int32] = [0, 0]
        guard folio_pipe(&pipe) == 0 else { throw DriverError("pipe2: \(String(cString: strerror(errno)))") }
        let logFile = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        let nullDevice = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer {
            close(nullDevice)
            close(pipe[1])
        }
        guard logFile >= 0 else { throw DriverError("cannot open \(logPath)") }
        var environment = ProcessInfo.processInfo.environment
        environment["FOLIO_SOCKET"] = nil
        environment["FOLIO_DATA"] = nil
        if let powerLoss { environment.merge(powerLoss.environment) { $1 } }
        do {
            process = try ChildProcess(
                executable: binary,
                arguments: [
                    "--data", dataDirectory, "--socket", socketPath, "--map-size", String(mapSize), "--durability",
                    durability, "--backup-dir", backupDirectory,
                ] + extraArguments,
                environment: environment, stdin: nullDevice, stdout: pipe[1], stderr: pipe[1])
        } catch {
            close(pipe[0])
            close(logFile)
            throw DriverError("\(error)")
        }
        pump = LogPump(pipe: pipe[0], logFile: logFile, mapGrowths: mapGrowths)
    }

    /// Waits until foliod answers `hello`; returns the seconds that took. A foliod that exits or
    /// does not answer within `timeout` is a violation: it failed to restart.
    func waitUntilServing(timeout: Double) throws(Violation) -> Double {
        guard let process else { throw Violation("foliod was not started") }
        let clock = ContinuousClock()
        let start = clock.now
        var problem = "no attempt"
        while clock.now - start < .seconds(timeout) {
            guard process.isRunning else {
                self.process = nil
                pump?.waitForEnd(timeout: 5)
                throw Violation(
                    "foliod exited with status \(process.exitStatus) while starting; its log ends:\n\(logTail())")
            }
            do {
                let connection = try FolioConnection(path: socketPath, timeout: 5)
                let hello = try connection.request(["op": "hello"])
                if hello.objectValue?["result"]?.objectValue?["server"] == "foliod" {
                    let elapsed = clock.now - start
                    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                }
                problem = "hello answered \(hello)"
            } catch {
                problem = "\(error)"
            }
            usleep(5_000)
        }
        throw Violation("foliod did not answer hello within \(timeout) s (\(problem)); its log ends:\n\(logTail())")
    }

    /// SIGKILL, and wait until the process and its stderr have ended; with `--power-loss`, then the
    /// power loss, whose figures it returns.
    @discardableResult
    func kill() throws(DriverError) -> PowerLoss.Figures? {
        guard process != nil else { return nil }
        abandon()
        return try powerLoss?.strike()
    }

    /// SIGKILL without a power loss: for a cycle that ends on a violation, whose data directory is
    /// kept as the checks found it.
    func abandon() {
        guard let process else { return }
        self.process = nil
        process.killAndWait()
        pump?.waitForEnd(timeout: 10)
        pump = nil
    }

    /// Whether foliod still runs (false once it exited on its own).
    var isRunning: Bool { process?.isRunning ?? false }

    /// The last lines of the log, for messages.
    func logTail() -> String {
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "(no log)"
        return text.split(separator: "\n").suffix(12).joined(separator: "\n")
    }
}
