/// A daemon under test: which protocol it speaks, where it listens, its process (for RSS), and what
/// the report calls it.
struct Target: Sendable {
    enum Kind: String, Sendable {
        case folio = "Folio"
        case redis = "Redis"
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
