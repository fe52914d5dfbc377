import Foundation
import Synchronization

/// Counters the daemon keeps for `stats`.
final class ServerStatistics: Sendable {
    let startedAt = Date()
    /// Connections open now, counted when accepted.
    let connections = Atomic<Int>(0)
    /// Writes every loop has handed to the writer whose outcomes have not come back (`IdlePoll`).
    let writesOut = Atomic<Int>(0)
    /// Clients answered `unavailable` and closed at accept: over the limit, or no descriptor left.
    let connectionsRefused = Atomic<Int>(0)
    /// Bytes held for clients: incomplete lines, queued output, requests not yet answered.
    let clientMemory = Atomic<Int>(0)
    /// Connections closed because their loop's share of the client memory budget was reached.
    let connectionsShed = Atomic<Int>(0)
    /// Connections closed for being idle (`idle-timeout`), or for leaving answers unread (`max-output`).
    let idleClosed = Atomic<Int>(0)
    let stuckReadersClosed = Atomic<Int>(0)
    /// Requests received and not yet answered, on every connection.
    let requestsPending = Atomic<Int>(0)
    /// Connections closed because a line did not end within the line timeout.
    let slowLinesClosed = Atomic<Int>(0)
    let commits = Atomic<Int>(0)
    let committedWrites = Atomic<Int>(0)
    let failedCommits = Atomic<Int>(0)
    /// Lone writes whose journal record went out as soon as their event was logged (`Writer`).
    let earlyRecords = Atomic<Int>(0)
    /// Batches the writer's thread found while it looked for work before sleeping (`WorkThread`).
    let writerPollFinds = Atomic<Int>(0)
    let watches = Atomic<Int>(0)
    /// Live queries answered and running.
    let liveQueries = Atomic<Int>(0)
    /// Uploads in pieces open now (`Uploads`).
    let uploads = Atomic<Int>(0)
    let metrics: Metrics
    /// Writes queued for the writer, reads for the workers.
    let writerQueue = Atomic<Int>(0)
    let workerQueue = Atomic<Int>(0)
    /// The largest lag of a watch that fell behind, in bytes, as last seen.
    let watchLag = Atomic<Int>(0)
    /// From the commit of an event to its line being written to a watcher's socket.
    let watchDelivery = LatencyRecorder()
    /// From a commit's confirmation to a live query's change line for it leaving for the socket.
    let liveDelivery = LatencyRecorder()

    /// The last event applied here, and the reads waiting for a later one (`minSeq`).
    let applied = AppliedSequence()
    /// Cluster mode: how this node follows the shared log; nil for a single node.
    let cluster = Mutex<ClusterStatus?>(nil)

    /// `loops`: the event loops, each counting requests into a shard of `metrics` of its own.
    init(loops: Int) { metrics = Metrics(shards: loops) }

    var uptime: Double { Date().timeIntervalSince(startedAt) }
}
