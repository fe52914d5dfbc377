import FolioClient
import Glibc

/// What the storms and the soak share: the foliod under test, a control connection to sample it,
/// the load that stands for its ordinary clients, and the run numbers that keep their fresh keys
/// apart.
final class LoadContext {
    /// The ordinary clients whose latency a storm must not hurt: 4 connections, each sending one
    /// request at a time, 90% `get` of existing keys and 10% durable `create`.
    static let active = Scenario(
        id: "active", title: "mixed 90% get / 10% create", clients: 4, depth: 1, readPercent: 90)

    let target: Target
    let pid: Int32
    let keyCount: Int
    /// How long each measured phase (before, during, after) runs.
    let phaseSeconds: Double
    private let control: FolioConnection
    private let nonce = String(time(nil), radix: 36)
    private var runNumber = 0
    /// Connections foliod serves when no storm and no load runs: this context's own, and its
    /// samplers'.
    private var ownConnections = 1

    init(socket: String, pid: Int32, keyCount: Int, phaseSeconds: Double) throws {
        target = Target(kind: .folio, socketPath: socket, pid: pid)
        self.pid = pid
        self.keyCount = keyCount
        self.phaseSeconds = phaseSeconds
        control = try FolioConnection(path: socket)
    }

    var socket: String { target.socketPath }

    /// Runs `scenario` for a phase (or `seconds`), after a short unmeasured warm-up.
    func load(_ scenario: Scenario, seconds: Double? = nil, warmup: Double = 0.5) throws -> RunResult {
        runNumber += 1
        let runner = ScenarioRunner(
            scenario: scenario, target: target,
            timing: ScenarioRunner.Timing(warmupSeconds: warmup, durationSeconds: seconds ?? phaseSeconds),
            keyCount: keyCount, runNumber: runNumber, nonce: nonce)
        return try runner.run()
    }

    func sample() throws -> DaemonSample { try DaemonSample.take(pid: pid, control: control) }

    /// A sample once foliod has seen every connection of the last load or storm close (it sees a
    /// close a moment after the client makes it); throws if they stay open for 30 s.
    func quietSample() throws -> DaemonSample {
        let (sample, quiet) = try waitUntil(timeout: 30) { $0.connections <= ownConnections }
        guard quiet else {
            throw BenchError.setup(
                "foliod still serves \(sample.connections) connections, not \(ownConnections), 30 s later")
        }
        return sample
    }

    /// Samples foliod every `intervalSeconds` until `stop(_:)`.
    func startSampler(intervalSeconds: Double) throws -> DaemonSampler {
        let sampler = try DaemonSampler(pid: pid, socket: socket, intervalSeconds: intervalSeconds)
        ownConnections += 1
        return sampler
    }

    func stop(_ sampler: DaemonSampler) throws -> [DaemonSample] {
        ownConnections -= 1
        return try sampler.stop()
    }

    /// Samples every 100 ms until `condition` holds, for at most `timeout` seconds; the last sample
    /// and whether the condition held.
    func waitUntil(timeout: Double, _ condition: (DaemonSample) -> Bool) throws -> (DaemonSample, held: Bool) {
        let deadline = MonotonicClock.now() + MonotonicClock.nanoseconds(seconds: timeout)
        while true {
            let sample = try sample()
            if condition(sample) { return (sample, true) }
            if MonotonicClock.now() >= deadline { return (sample, false) }
            MonotonicClock.sleep(until: MonotonicClock.now() + 100_000_000)
        }
    }

    static func seconds(_ from: UInt64, _ to: UInt64) -> Double { Double(to &- from) / 1e9 }
}

extension RunResult {
    /// The p99 of all requests, of one kind, in nanoseconds.
    func p99(_ kind: Operation.Kind? = nil) -> UInt64? {
        (kind.map { tally.latencies(of: $0) } ?? tally.allLatencies).percentile(0.99)
    }
}
