import FolioProtocol
import FolioStore
import LMDB

/// How the daemon runs: where, with which limits and durability.
public struct ServerConfiguration: Sendable {
    public enum Durability: String, Sendable, CaseIterable {
        /// Every acknowledged write is on disk (LMDB syncs data and meta page at each commit).
        case full
        /// The meta page is not synced: an OS crash or power loss may undo the last commits; the
        /// database stays intact. A crash of foliod alone loses nothing.
        case relaxed
        /// Nothing is synced at commit; foliod flushes once a second. An OS crash or power loss may
        /// lose the last second of acknowledged writes, and may leave the database damaged (LMDB's
        /// pages can reach the disk out of order). A crash of foliod alone loses nothing.
        case none

        /// `full` also runs LMDB without meta syncs: the writer confirms each batch with a later sync.
        var syncMode: Environment.SyncMode {
            switch self {
            case .full: return .noMetaSync
            case .relaxed: return .noMetaSync
            case .none: return .noSync
            }
        }
    }

    public var dataDirectory: String
    public var socketPath: String
    public var maxLineBytes = 1 << 20
    public var durability = Durability.full
    public var eventLoops = 2
    /// Writes applied in one commit at most, and their request bytes at most.
    public var maxBatchCount = 1024
    public var maxBatchBytes = 8 << 20
    public var mapSize = 1 << 30
    /// How long a request key is remembered, in seconds of event time (`--request-key-ttl`).
    public var requestKeyRetentionSeconds: Int64 = 24 * 3600
    /// Bytes of events a watch may fall behind by (committed, wanted, not yet sent) before it is cut
    /// off as lagging.
    public var watchBufferBytes = 8 << 20
    /// Connections served at once; nil: as many as the descriptor limit allows, less
    /// `reservedDescriptors`. A client beyond it is answered `unavailable` and closed.
    public var maxConnections: Int?
    /// Descriptors kept free of connections for the store, verify, backup and the like.
    public static let reservedDescriptors = 64
    /// Memory held for all clients at most: incomplete lines, queued output and requests not yet
    /// answered. Each event loop gets an equal share; a loop over its share closes its largest
    /// holders first.
    public var clientMemoryBytes = 256 << 20
    /// A request line must arrive whole within this many seconds of its first byte (0: no limit).
    public var lineTimeoutSeconds = 60
    /// Threads for reads whose cost grows with the data (scans, verify, backup, stats).
    public var workerThreads = 2

    public init(dataDirectory: String, socketPath: String) {
        self.dataDirectory = dataDirectory
        self.socketPath = socketPath
    }
}
