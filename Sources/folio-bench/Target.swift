/// A daemon under test: which protocol it speaks, where it listens, its processes (for RSS and CPU),
/// and what the report calls it. SQLite is no daemon: its "socket" is the database file, it has no
/// pid, and it runs inside folio-bench.
///
/// A target may be several foliod nodes of one cluster (docs/CLUSTER.md): its clients are spread
/// over their sockets round-robin, and its CPU time is that of all its processes (the nodes, and
/// PostgreSQL's if given).
struct Target: Sendable {
    enum Kind: String, Sendable {
        case folio = "Folio"
        case redis = "Redis"
        /// WAL, `synchronous=FULL`: a commit is on disk before the statement returns.
        case sqlite = "SQLite"
        /// WAL, `synchronous=NORMAL`: a commit is in the WAL file but not yet synced (a power loss may
        /// lose the latest commits, not corrupt the database).
        case sqliteNormal = "SQLite (synchronous=NORMAL)"
    }

    let kind: Kind
    /// At least one; client k connects to `socketPaths[k % count]`.
    let socketPaths: [String]
    /// Processes whose CPU time is the target's; the first one's memory is sampled. Empty: unknown.
    let pids: [Int32]
    /// The kind's name, unless given (`Folio before` for a foliod built from an earlier commit).
    let name: String

    init(kind: Kind, socketPath: String, pid: Int32?, name: String? = nil) {
        self.init(kind: kind, socketPaths: [socketPath], pids: pid.map { [$0] } ?? [], name: name)
    }

    init(kind: Kind, socketPaths: [String], pids: [Int32], name: String? = nil) {
        precondition(!socketPaths.isEmpty, "a target needs a socket")
        self.kind = kind
        self.socketPaths = socketPaths
        self.pids = pids
        self.name = name ?? kind.rawValue
    }

    /// The first socket: where keys are created and the server is described.
    var socketPath: String { socketPaths[0] }
    /// The process whose memory is sampled.
    var pid: Int32? { pids.first }

    func connect() throws -> any LoadClient { try connect(to: socketPath) }

    /// The connection of client `index`: to the target's sockets in turn.
    func connect(client index: Int) throws -> any LoadClient { try connect(to: socketPaths[index % socketPaths.count]) }

    private func connect(to path: String) throws -> any LoadClient {
        switch kind {
        case .folio: return try FolioLoadClient(path: path)
        case .redis: return try RESPClient(path: path)
        case .sqlite: return try SQLiteLoadClient(path: path, synchronous: .full)
        case .sqliteNormal: return try SQLiteLoadClient(path: path, synchronous: .normal)
        }
    }

    /// Connects, retrying while the daemon is still starting, for up to `timeout` seconds.
    func connectWhenReady(timeout: Double) throws -> any LoadClient {
        let deadline = MonotonicClock.now() + MonotonicClock.nanoseconds(seconds: timeout)
        while true {
            do {
                return try connect()
            } catch {
                if MonotonicClock.now() >= deadline { throw error }
                MonotonicClock.sleep(until: MonotonicClock.now() + 50_000_000)
            }
        }
    }

    /// User plus system CPU seconds of each of the target's processes that is running; nil when none
    /// is known or runs. A process that ends meanwhile (PostgreSQL's autovacuum workers come and go) drops
    /// out of `CPUTime.since`.
    func cpu() -> CPUTime? {
        guard !pids.isEmpty else { return nil }
        var time = CPUTime()
        for pid in pids {
            guard let process = ProcessCPU.read(pid: pid), let threads = ThreadCPU.read(pid: pid) else { continue }
            time.secondsByProcess[pid] = process.seconds
            time.threadsByProcess[pid] = threads
        }
        return time.secondsByProcess.isEmpty ? nil : time
    }
}
