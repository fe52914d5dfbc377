/// A daemon under test: which protocol it speaks, where it listens, its process (for RSS), and what
/// the report calls it. SQLite is no daemon: its "socket" is the database file, it has no pid, and
/// it runs inside folio-bench.
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
    let socketPath: String
    let pid: Int32?
    /// The kind's name, unless given (`Folio before` for a foliod built from an earlier commit).
    let name: String

    init(kind: Kind, socketPath: String, pid: Int32?, name: String? = nil) {
        self.kind = kind
        self.socketPath = socketPath
        self.pid = pid
        self.name = name ?? kind.rawValue
    }

    func connect() throws -> any LoadClient {
        switch kind {
        case .folio: return try FolioLoadClient(path: socketPath)
        case .redis: return try RESPClient(path: socketPath)
        case .sqlite: return try SQLiteLoadClient(path: socketPath, synchronous: .full)
        case .sqliteNormal: return try SQLiteLoadClient(path: socketPath, synchronous: .normal)
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
}
