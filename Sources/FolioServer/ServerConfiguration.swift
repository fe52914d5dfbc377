import FolioProtocol
import FolioStore
import Glibc
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
    /// Full durability through the journal: one sync per group commit (`Journal`). nil: as
    /// `journaling` decides.
    public var journal: Bool?
    public var journalSize = Journal.defaultSize
    /// Whether writes go through the journal: as `journal` says, and when it says nothing, with
    /// full durability on a single node (a cluster node's log is PostgreSQL's, and `relaxed` and
    /// `none` do not sync at every commit anyway).
    public var journaling: Bool { journal ?? (durability == .full && clusterLog == nil) }
    public var eventLoops = 2
    /// The longest an event loop looks for work before it sleeps, in µs (`IdlePoll`); 0 never.
    public var idlePollMicroseconds = IdlePoll.defaultLimit
    /// Writes applied in one commit at most, and their request bytes at most.
    public var maxBatchCount = 1024
    public var maxBatchBytes = 8 << 20
    public var mapSize = 1 << 30
    /// How long a request key is remembered, in seconds of event time (`--request-key-ttl`).
    public var requestKeyRetentionSeconds: Int64 = 24 * 3600
    /// How long a blob no file name refers to is kept before the sweep removes it (`--file-grace`).
    public var fileGraceSeconds = 3600
    /// The largest file an upload in pieces may make (`--file-max-size`).
    public var fileMaxBytes: UInt64 = 1 << 30
    /// How long an upload in pieces may go without a piece before it is aborted (`--upload-timeout`).
    public var uploadTimeoutSeconds = 900
    /// Bytes of events a watch may fall behind by (committed, wanted, not yet sent) before it is cut
    /// off as lagging.
    public var watchBufferBytes = 8 << 20
    /// How many events a live query resumes across (`resumeAfter`); from further back it starts
    /// afresh (`--live-resume-events`).
    public var liveResumeEvents = 100_000
    /// Connections served at once, at most as many as the descriptor limit allows less
    /// `reservedDescriptors`. A client beyond it is answered `unavailable` and closed.
    public var maxConnections = 4096
    /// Requests received and not yet answered, per connection; beyond, reading from it pauses.
    public var maxPendingRequests = 8192
    /// The same on every connection together; beyond, reading pauses everywhere.
    public var maxTotalRequests = 65536
    /// Answers a connection may leave unread; beyond, it is closed.
    public var maxOutputBytes = 64 << 20
    /// Descriptors kept free of connections for the store, verify, backup and the like.
    public static let reservedDescriptors = 64
    /// Memory held for all clients at most: incomplete lines, queued output and requests not yet
    /// answered. Each event loop gets an equal share; a loop over its share closes its largest
    /// holders first.
    public var clientMemoryBytes = 256 << 20
    /// A request line must arrive whole within this many seconds of its first byte (0: no limit).
    public var lineTimeoutSeconds = 10
    /// A connection with nothing in flight and no watch is closed after this many idle seconds (0: never).
    public var idleTimeoutSeconds = 0
    public var socketMode: mode_t = 0o660
    /// The socket's group (by name); nil: foliod's own.
    public var socketGroup: String?
    public var logLevel = Log.Level.notice
    /// Requests that take longer are logged at level info.
    public var slowRequestMilliseconds = 1000
    /// Backups are written only below it (default: `backups` in the data directory).
    public var backupDirectory: String?
    /// A Unix socket serving `GET /metrics` over HTTP/1.0, if set.
    public var metricsSocket: String?
    /// The file the configuration was read from, for SIGHUP.
    public var configPath: String?
    public var access = AccessPolicy()
    /// Threads for reads whose cost grows with the data (scans, verify, backup, stats).
    public var workerThreads = 2
    /// Cluster mode: the libpq connection string of the PostgreSQL that holds the shared log
    /// (`--log postgres:CONNINFO`, docs/CLUSTER.md); nil: a single node with its log in LMDB.
    public var clusterLog: String?
    /// Seconds a call to the cluster's log may take (connect or statement) before the write is
    /// answered `unavailable` (`--log-timeout`).
    public var clusterTimeoutSeconds = 5.0
    /// Seconds a read with `minSeq` waits for this node to apply that sequence (`--min-seq-timeout`).
    public var minSeqTimeoutSeconds = 5.0

    public init(dataDirectory: String, socketPath: String) {
        self.dataDirectory = dataDirectory
        self.socketPath = socketPath
    }
}

extension ServerConfiguration {
    /// This configuration with the settings SIGHUP may change taken from `fresh`.
    func applyingLive(from fresh: ServerConfiguration) -> ServerConfiguration {
        var applied = self
        applied.maxConnections = fresh.maxConnections
        applied.maxPendingRequests = fresh.maxPendingRequests
        applied.maxTotalRequests = fresh.maxTotalRequests
        applied.maxOutputBytes = fresh.maxOutputBytes
        applied.clientMemoryBytes = fresh.clientMemoryBytes
        applied.lineTimeoutSeconds = fresh.lineTimeoutSeconds
        applied.idleTimeoutSeconds = fresh.idleTimeoutSeconds
        applied.watchBufferBytes = fresh.watchBufferBytes
        applied.logLevel = fresh.logLevel
        applied.slowRequestMilliseconds = fresh.slowRequestMilliseconds
        applied.backupDirectory = fresh.backupDirectory
        applied.fileMaxBytes = fresh.fileMaxBytes
        applied.access = fresh.access
        return applied
    }

    /// The live settings that differ in `fresh`, by name.
    func liveDifferences(from fresh: ServerConfiguration) -> [String] {
        var names: [String] = []
        if maxConnections != fresh.maxConnections { names.append("max-connections") }
        if maxPendingRequests != fresh.maxPendingRequests { names.append("max-requests") }
        if maxTotalRequests != fresh.maxTotalRequests { names.append("max-requests-total") }
        if maxOutputBytes != fresh.maxOutputBytes { names.append("max-output") }
        if clientMemoryBytes != fresh.clientMemoryBytes { names.append("client-memory") }
        if lineTimeoutSeconds != fresh.lineTimeoutSeconds { names.append("partial-line-timeout") }
        if idleTimeoutSeconds != fresh.idleTimeoutSeconds { names.append("idle-timeout") }
        if watchBufferBytes != fresh.watchBufferBytes { names.append("watch-buffer") }
        if logLevel != fresh.logLevel { names.append("log-level") }
        if slowRequestMilliseconds != fresh.slowRequestMilliseconds { names.append("slow-request") }
        if backupDirectory != fresh.backupDirectory { names.append("backup-dir") }
        if fileMaxBytes != fresh.fileMaxBytes { names.append("file-max-size") }
        if access != fresh.access { names.append("access") }
        return names
    }

    /// The settings that differ in `fresh` and that only a restart applies, by name.
    func restartOnlyDifferences(from fresh: ServerConfiguration) -> [String] {
        var names: [String] = []
        if dataDirectory != fresh.dataDirectory { names.append("data") }
        if socketPath != fresh.socketPath { names.append("socket") }
        if socketMode != fresh.socketMode { names.append("socket-mode") }
        if socketGroup != fresh.socketGroup { names.append("socket-group") }
        if durability != fresh.durability { names.append("durability") }
        if journaling != fresh.journaling { names.append("journal") }
        if journalSize != fresh.journalSize { names.append("journal-size") }
        if eventLoops != fresh.eventLoops { names.append("threads") }
        if idlePollMicroseconds != fresh.idlePollMicroseconds { names.append("idle-poll") }
        if workerThreads != fresh.workerThreads { names.append("workers") }
        if mapSize != fresh.mapSize { names.append("map-size") }
        if maxLineBytes != fresh.maxLineBytes { names.append("max-line") }
        if requestKeyRetentionSeconds != fresh.requestKeyRetentionSeconds { names.append("request-key-ttl") }
        if fileGraceSeconds != fresh.fileGraceSeconds { names.append("file-grace") }
        if uploadTimeoutSeconds != fresh.uploadTimeoutSeconds { names.append("upload-timeout") }
        if metricsSocket != fresh.metricsSocket { names.append("metrics-socket") }
        if liveResumeEvents != fresh.liveResumeEvents { names.append("live-resume-events") }
        if clusterLog != fresh.clusterLog { names.append("log") }
        if clusterTimeoutSeconds != fresh.clusterTimeoutSeconds { names.append("log-timeout") }
        if minSeqTimeoutSeconds != fresh.minSeqTimeoutSeconds { names.append("min-seq-timeout") }
        return names
    }
}
