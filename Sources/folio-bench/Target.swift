/// A daemon under test: which protocol it speaks, where it listens, and its process (for RSS).
struct Target: Sendable {
    enum Kind: String, Sendable {
        case folio = "Folio"
        case redis = "Redis"
    }

    let kind: Kind
    let socketPath: String
    let pid: Int32?

    var name: String { kind.rawValue }

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
