import Foundation
import Synchronization

/// Counters the daemon keeps for `stats`.
final class ServerStatistics: Sendable {
    let startedAt = Date()
    let connections = Atomic<Int>(0)
    let acceptedConnections = Atomic<Int>(0)
    let commits = Atomic<Int>(0)
    let committedWrites = Atomic<Int>(0)
    let failedCommits = Atomic<Int>(0)
    let watches = Atomic<Int>(0)
    /// From the commit of an event to its line being written to a watcher's socket.
    let watchDelivery = LatencyRecorder()

    var uptime: Double { Date().timeIntervalSince(startedAt) }
}
