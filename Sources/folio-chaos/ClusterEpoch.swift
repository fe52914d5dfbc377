import FolioClient
import FolioHarness
import FolioJSON
import Foundation
import Glibc

/// One store of the crash loop in cluster mode (`--cluster N`, docs/CLUSTER.md): N foliod nodes, each
/// on a data directory of its own, sharing one log in a database of their own on the loop's
/// PostgreSQL. Client k writes through node k mod N. Each cycle crashes one of three things while
/// the clients write:
///
/// - **one node** (`kill -9`): the others serve on for a moment, then it starts again and catches up
///   (one time in four from an empty data directory: it joins afresh and replays the whole log);
/// - **every node**: each resumes from its own copy and catches up;
/// - **PostgreSQL** (`pg_ctl stop -m immediate`: no checkpoint, its unflushed WAL lost), started
///   again while the nodes serve: writes meanwhile must fail, and nothing acknowledged may be lost.
///
/// Every other retry of a keyed write goes through the next node, which must answer it with the
/// first answer and write nothing. Then every node must reach PostgreSQL's head with its chain
/// head, the history is checked on node 1 (`RestartCheck`, as for a single foliod), and every other
/// node must hold node 1's digest and chain head and pass `verify`. All decided by the store's
/// seed, as `Epoch` is.
final class ClusterEpoch: StoreEpoch {
    /// What a cycle crashes.
    enum Target: Equatable {
        case node(Int)
        case allNodes
        case postgres
    }

    /// Every random choice of one cycle, drawn up front in a fixed order (as `CyclePlan`).
    struct Plan {
        let target: Target
        /// When the crash comes.
        let killAfterMilliseconds: Int
        /// How long the clients of the nodes still running go on after it.
        let afterMilliseconds: Int
        /// For `postgres`: how long it stays down.
        let downMilliseconds: Int
        /// A node killed while it starts (catching up), before the cycle's start: which, and after
        /// what fraction of the last start-up.
        let startupKill: (node: Int, fraction: Double)?
        /// For `node`: its data directory is removed before it starts again, so that it joins
        /// afresh and replays the whole log.
        let emptied: Bool

        init(_ random: inout SplitMix64, nodes: Int, workloadMilliseconds: Int) {
            let draw = Int.random(in: 0..<4, using: &random)
            let node = Int.random(in: 0..<nodes, using: &random)
            target = draw < 2 ? .node(node) : draw == 2 ? .allNodes : .postgres
            killAfterMilliseconds = Int.random(in: 20...workloadMilliseconds, using: &random)
            afterMilliseconds = Int.random(in: 0...200, using: &random)
            downMilliseconds = Int.random(in: 0...500, using: &random)
            let startupNode = Int.random(in: 0..<nodes, using: &random)
            let fraction = Double.random(in: 0...1.2, using: &random)
            startupKill = Int.random(in: 0..<4, using: &random) == 0 ? (startupNode, fraction) : nil
            emptied = Int.random(in: 0..<4, using: &random) == 0
        }
    }

    let seed: UInt64
    let directory: String
    private let options: ChaosOptions
    private let postgres: PostgresServer
    private let database: String
    private let nodes: [Foliod]
    private let ledgers: [ClientLedger]
    private let logged: LoggedState
    private var random: SplitMix64
    private var startupSeconds = 0.2

    /// Creates the store's database on `postgres` and the nodes' directories (nothing runs yet).
    init(seed: UInt64, directory: String, options: ChaosOptions, postgres: PostgresServer) throws {
        self.seed = seed
        self.directory = directory
        self.options = options
        self.postgres = postgres
        database = "store_\(seed)"
        let conninfo = try postgres.createDatabase(database)
        nodes = try (1...options.clusterNodes).map { number in
            let nodeDirectory = directory + "/node\(number)"
            try FileManager.default.createDirectory(atPath: nodeDirectory, withIntermediateDirectories: true)
            return Foliod(
                binary: options.foliod, directory: nodeDirectory, mapSize: options.mapSize,
                durability: options.durability,
                extraArguments: ["--log", "postgres:" + conninfo] + options.foliodArguments)
        }
        ledgers = (0..<options.clients).map { ClientLedger(client: $0) }
        logged = LoggedState(generators: options.clusterNodes)
        random = SplitMix64(seed: seed)
    }

    var keptFiles: String {
        "journal.jsonl, node1 … node\(nodes.count) (foliod.log, data/); PostgreSQL's log goes with the run"
    }
    var powerLossNote: String? { nil }

    func cycle(_ index: Int, _ tally: inout Tally) throws {
        // A violation leaves the data directories as the checks found them.
        defer { for node in nodes { node.abandon() } }
        var phases = PhaseClock()
        defer { tally.add(phases) }
        let plan = Plan(&random, nodes: nodes.count, workloadMilliseconds: options.workloadMilliseconds)
        if !postgres.isRunning { try postgres.start() }
        if let (number, fraction) = plan.startupKill {
            try nodes[number].spawn()
            sleep(seconds: fraction * startupSeconds)
            nodes[number].abandon()
            tally.cluster.startupKills += 1
        }
        for node in nodes { try node.spawn() }
        for node in nodes { startupSeconds = max(0.05, try node.waitUntilServing(timeout: 120)) }
        if index == 0 { try Epoch.defineSchemas(socketPath: nodes[0].socketPath, ledger: ledgers[0]) }
        phases.end("start")

        let stopped = Locked(false)
        let clients = ledgers.map { ledger in
            WorkloadClient(
                ledger: ledger, seed: seed &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(index) << 16 &+ UInt64(ledger.client),
                socketPath: nodes[ledger.client % nodes.count].socketPath, timeout: 30, faults: options.faults,
                stopped: { stopped.current },
                retrySocketPath: nodes.count > 1 ? nodes[(ledger.client + 1) % nodes.count].socketPath : nil)
        }
        let finished = DispatchGroup()
        for client in clients {
            finished.enter()
            Thread {
                client.run()
                finished.leave()
            }.start()
        }
        sleep(seconds: Double(plan.killAfterMilliseconds) / 1000)
        let aliveAtCrash = nodes.map(\.isRunning)
        switch plan.target {
        case .node(let number):
            nodes[number].abandon()
            tally.cluster.nodeKills += 1
        case .allNodes:
            for node in nodes { node.abandon() }
            tally.cluster.allNodeKills += 1
        case .postgres:
            try postgres.stop(immediate: true)
            sleep(seconds: Double(plan.downMilliseconds) / 1000)
            try postgres.start()
            tally.cluster.postgresStops += 1
        }
        sleep(seconds: Double(plan.afterMilliseconds) / 1000)
        stopped.withLock { $0 = true }
        if finished.wait(timeout: .now() + 90) == .timedOut {
            throw Violation("clients still waiting 90 s after the crash (\(plan.target))")
        }
        for (offset, alive) in aliveAtCrash.enumerated() where !alive {
            throw Violation(
                "node \(offset + 1) had exited by itself before the crash; its log ends:\n\(nodes[offset].logTail())")
        }
        for (offset, node) in nodes.enumerated()
        where plan.target != .allNodes && plan.target != .node(offset) && !node.isRunning {
            throw Violation(
                "node \(offset + 1) exited by itself after \(plan.target); its log ends:\n\(node.logTail())")
        }
        tally.cluster.crossNodeRetries += clients.reduce(0) { $0 + $1.crossNodeRetries }
        if let violation = clients.flatMap(\.violations).first { throw violation }
        phases.end("workload")
        try Epoch.appendJournal(directory: directory, ledgers: ledgers, service: [])

        // Restart what was killed (a killed node, one time in four, from an empty data directory);
        // every node must catch up with the log.
        if case .node(let number) = plan.target, plan.emptied {
            try FileManager.default.removeItem(atPath: nodes[number].dataDirectory)
            tally.cluster.rejoins += 1
        }
        for node in nodes where !node.isRunning { try node.spawn() }
        for node in nodes { _ = try node.waitUntilServing(timeout: 120) }
        phases.end("restart")
        let head = try logHead()
        for (offset, node) in nodes.enumerated() {
            let wait = try waitForHead(head, node: node, number: offset + 1)
            tally.cluster.longestFollowWait = max(tally.cluster.longestFollowWait, wait)
        }
        phases.end("catch-up")

        let connection = try FolioConnection.forChecks(nodes[0].socketPath, timeout: 120)
        let figures = try RestartCheck(connection: connection, ledgers: ledgers, logged: logged).run()
        connection.close()
        guard figures.chainHead == head.hash else {
            throw Violation(
                "node 1's chain head \(figures.chainHead) is not PostgreSQL's \(head.hash) at event \(head.sequence)")
        }
        tally.add(figures)
        for (offset, node) in nodes.enumerated().dropFirst() {
            let connection = try FolioConnection.forChecks(node.socketPath, timeout: 120)
            defer { connection.close() }
            let stats = try connection.call(["op": "stats"])
            guard stats["digest"]?.stringValue == figures.digest, stats["chainHead"]?.stringValue == figures.chainHead
            else {
                throw Violation(
                    "node \(offset + 1) holds digest \(stats["digest"] ?? .null) and chain head \(stats["chainHead"] ?? .null); "
                        + "node 1 holds \(figures.digest) and \(figures.chainHead)")
            }
            let report = try connection.call(["op": "verify"])
            guard report["ok"] == .bool(true), report["mismatches"] == .array([]),
                report["digest"]?.stringValue == figures.digest
            else {
                throw Violation("verify on node \(offset + 1) reports \(JSON.object(report))")
            }
            tally.cluster.nodesCompared += 1
        }
        phases.end("checks")
        // Killed idle at the end: the next cycle starts every node from its copy.
        for node in nodes { node.abandon() }
    }

    /// The log's head in PostgreSQL: its sequence and chain hash (hex).
    private func logHead() throws -> (sequence: Int64, hash: String) {
        let line = try postgres.psql("SELECT seq || ' ' || encode(hash, 'hex') FROM folio_head", database: database)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let parts = line.split(separator: " ")
        guard parts.count == 2, let sequence = Int64(parts[0]) else { throw DriverError("folio_head reads '\(line)'") }
        return (sequence, String(parts[1]))
    }

    /// Waits (60 s at most) until `node` has applied the log up to `head` and follows the log (it
    /// reaches PostgreSQL); its chain head there must be PostgreSQL's.
    /// Returns how long it showed the head but not `following`.
    private func waitForHead(_ head: (sequence: Int64, hash: String), node: Foliod, number: Int) throws -> Double {
        let connection = try FolioConnection.forChecks(node.socketPath, timeout: 60)
        defer { connection.close() }
        let deadline = ContinuousClock.now + .seconds(60)
        var atHead: ContinuousClock.Instant?
        while true {
            let stats = try connection.call(["op": "stats"])
            let last = stats["lastSeq"]?.integerValue ?? -1
            if last >= head.sequence {
                guard last == head.sequence, stats["chainHead"]?.stringValue == head.hash else {
                    throw Violation(
                        "node \(number) at event \(last) does not hold PostgreSQL's head \(head): \(JSON.object(stats))"
                    )
                }
                // Right after PostgreSQL came back, a node may not have reached it yet (it tries
                // every 0.2 s): it must, in time.
                let now = ContinuousClock.now
                if stats["cluster"]?.objectValue?["state"] == "following" {
                    let waited = atHead.map { now - $0 } ?? .zero
                    return Double(waited.components.seconds) + Double(waited.components.attoseconds) / 1e18
                }
                if atHead == nil { atHead = now }
            }
            guard ContinuousClock.now < deadline else {
                throw Violation(
                    "node \(number) did not reach event \(head.sequence) and follow the log within 60 s: \(JSON.object(stats))"
                )
            }
            usleep(20_000)
        }
    }

    private func sleep(seconds: Double) {
        if seconds > 0 { usleep(UInt32(seconds * 1_000_000)) }
    }
}
