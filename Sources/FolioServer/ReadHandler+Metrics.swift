import FolioStore
import Foundation

extension ReadHandler {
    /// Every counter of the daemon in Prometheus text exposition format (version 0.0.4).
    func metricsText(_ snapshot: Snapshot) throws -> String {
        let metrics = statistics.metrics
        var text = MetricsText()
        text.family("folio_requests_total", "counter", "Requests answered, by op and outcome (ok or the error code).")
        for (opIndex, op) in Metrics.ops.enumerated() {
            for (outcomeIndex, outcome) in Metrics.outcomes.enumerated() {
                let count = metrics.requestCount(op: opIndex, outcome: outcomeIndex)
                if count > 0 || (outcome == "ok" && op != "invalid") {
                    text.sample("folio_requests_total", [("op", op), ("outcome", outcome)], Double(count))
                }
            }
        }
        text.family(
            "folio_request_duration_seconds", "histogram", "From a request line's arrival to its answer, by op.")
        let bounds = Histogram.seconds().bounds
        for (opIndex, op) in Metrics.ops.enumerated() {
            let latency = metrics.latency(op: opIndex)
            guard latency.count > 0 else { continue }
            text.histogram("folio_request_duration_seconds", [("op", op)], bounds: bounds, latency)
        }
        text.family(
            "folio_refusals_total", "counter",
            "Connections closed or requests refused, by the limit or rule that refused them.")
        for refusal in Metrics.Refusal.allCases {
            text.sample(
                "folio_refusals_total", [("cause", refusal.rawValue)],
                Double(metrics.refusals[refusal.rawValue]?.current ?? 0))
        }
        text.family("folio_writer_batch_writes", "histogram", "Writes applied in one commit (group commit).")
        text.histogram("folio_writer_batch_writes", [], metrics.batchWrites)
        text.family(
            "folio_commit_duration_seconds", "histogram",
            "An LMDB write transaction's commit, data pages flushed included.")
        text.histogram("folio_commit_duration_seconds", [], metrics.commitSeconds)
        text.family(
            "folio_sync_duration_seconds", "histogram",
            "A flush that confirms commits (full durability): the journal's write and sync, or data.mdb's without it.")
        text.histogram("folio_sync_duration_seconds", [], metrics.syncSeconds)
        let gauges: [(String, String, Double)] = [
            ("folio_connections", "Client connections open.", Double(statistics.connections.load(ordering: .relaxed))),
            ("folio_watches", "Watches running.", Double(statistics.watches.load(ordering: .relaxed))),
            ("folio_live_queries", "Live queries running.", Double(statistics.liveQueries.load(ordering: .relaxed))),
            (
                "folio_requests_pending", "Requests received and not yet answered.",
                Double(statistics.requestsPending.load(ordering: .relaxed))
            ),
            (
                "folio_client_memory_bytes",
                "Memory held for clients: partial lines, queued answers, unanswered requests.",
                Double(statistics.clientMemory.load(ordering: .relaxed))
            ),
            (
                "folio_writer_queue", "Writes waiting for the writer.",
                Double(statistics.writerQueue.load(ordering: .relaxed))
            ),
            (
                "folio_worker_queue", "Reads waiting for a worker thread.",
                Double(statistics.workerQueue.load(ordering: .relaxed))
            ),
            (
                "folio_watch_lag_bytes", "Bytes of events the watches furthest behind have yet to send.",
                Double(statistics.watchLag.load(ordering: .relaxed))
            ),
        ]
        for (name, help, value) in gauges {
            text.family(name, "gauge", help)
            text.sample(name, [], value)
        }
        let counters: [(String, String, Int)] = [
            (
                "folio_commits_total", "Write transactions committed that stored at least one write.",
                statistics.commits.load(ordering: .relaxed)
            ),
            (
                "folio_events_appended_total", "Events appended by committed writes.",
                statistics.committedWrites.load(ordering: .relaxed)
            ),
            ("folio_failed_commits_total", "Commits that failed.", statistics.failedCommits.load(ordering: .relaxed)),
            (
                "folio_journal_early_records_total",
                "Lone writes whose journal record went out as soon as their event was logged.",
                statistics.earlyRecords.load(ordering: .relaxed)
            ),
            (
                "folio_writer_idle_poll_finds_total",
                "Writes the writer's thread found while it looked for work before sleeping (--idle-poll).",
                statistics.writerPollFinds.load(ordering: .relaxed)
            ),
            ("folio_watch_events_total", "Live watch event lines delivered.", statistics.watchDelivery.summary.count),
            ("folio_live_changes_total", "Live query change lines delivered.", statistics.liveDelivery.summary.count),
        ]
        for (name, help, value) in counters {
            text.family(name, "counter", help)
            text.sample(name, [], Double(value))
        }
        let stats = try snapshot.statistics()
        let store: [(String, String, Double)] = [
            ("folio_last_sequence", "Sequence of the last event.", Double(stats.lastSequence)),
            ("folio_objects", "Live objects.", Double(stats.objectsPerCollection.reduce(0) { $0 + $1.count })),
            ("folio_lmdb_map_size_bytes", "Size of the LMDB map.", Double(stats.mapSize)),
            ("folio_lmdb_used_bytes", "Bytes of the map in use.", Double(stats.usedSize)),
            ("folio_lmdb_file_bytes", "Size of data.mdb, the reserve included.", Double(stats.fileSize)),
            ("folio_lmdb_readers", "Most LMDB reader slots in use so far.", Double(stats.readerSlotsUsed)),
            ("folio_lmdb_max_readers", "LMDB reader slots.", Double(stats.maxReaders)),
            ("folio_uptime_seconds", "Seconds since the daemon started.", statistics.uptime),
        ]
        for (name, help, value) in store {
            text.family(name, "gauge", help)
            text.sample(name, [], value)
        }
        text.family("folio_view_ops_pending", "gauge", "Views' changes not yet merged into their trees.")
        text.sample("folio_view_ops_pending", [], Double(stats.viewOpsPending))
        text.family(
            "folio_view_merges_total", "counter",
            "Merges of the views' pending changes into their trees (rounds of a view at a time).")
        text.sample("folio_view_merges_total", [], Double(stats.viewMerges))
        return text.text
    }
}
