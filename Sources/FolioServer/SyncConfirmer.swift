import FolioProtocol
import FolioStore
import LMDB

#if DEBUG
import Failpoints
#endif

/// Makes committed batches durable before they are answered: takes every batch committed since its
/// last round, makes them durable at once, then hands them on in commit order. Runs beside the
/// writer, so the writer applies the next batch while the last one is being made durable. How is
/// the `Durability` it is given:
///
/// - `.lmdb`: syncs the environment once (`Environment.sync`), which puts the meta pages the
///   commits wrote without syncing (`MDB_NOMETASYNC`) on disk;
/// - `.journal`: appends the batches' events to the journal and syncs it once (`Journal.append`);
///   LMDB committed them without syncing, and the `Checkpointer` makes `data.mdb` durable.
///
/// A failure is final. The pages a sync was to flush may be gone from the disk while the page cache
/// still shows them, and Linux reports the failure only once: a later sync can succeed without
/// writing them. So the batches it covered, and every batch after it, are answered `unavailable`
/// (applied, visible, but in doubt), none is shown to watchers, and `halt` stops the writer.
final class SyncConfirmer: Sendable {
    enum Durability {
        case lmdb(Environment)
        case journal(Journal)

        /// What failed, for the halt's log line.
        var what: String {
            switch self {
            case .lmdb: return "a failed flush of data.mdb"
            case .journal: return "a failed write or flush of the journal"
            }
        }

        func makeDurable(_ batches: [[Writer.Outcome]]) throws {
            switch self {
            case .lmdb(let environment): try environment.sync()
            case .journal(let journal): try journal.append(batches.map { $0.flatMap { (try? $0.result.get())?.appended ?? [] } })
            }
        }
    }

    private struct Batch {
        let outcomes: [Writer.Outcome]
        /// The batch committed data (a batch of failures only waits for its turn).
        let needsSync: Bool
        /// Bytes of the events it appended, counted by `Backlog`.
        let bytes: Int
    }

    /// Bytes of events committed and not yet confirmed. The writer waits in `confirm` while more
    /// than `limit` are: with the journal, commits do not sync, so without it a writer of large
    /// batches would run ahead of the journal's syncs (a batch larger than half the ring is made
    /// durable by a checkpoint, a flush of data.mdb) and hold every batch's events in memory,
    /// beyond what `--client-memory` counts. Without the journal each commit syncs its pages and
    /// the writer never gets far ahead.
    private final class Backlog: @unchecked Sendable {
        static let limit = 8 << 20
        private let lock = ConditionLock()
        private var bytes = 0

        func add(_ count: Int) {
            lock.withLock {
                while bytes > 0 && bytes + count > Self.limit { lock.wait() }
                bytes += count
            }
        }

        func remove(_ count: Int) {
            lock.withLock {
                bytes -= count
                lock.broadcast()
            }
        }
    }

    private let work: WorkThread<Batch>
    private let backlog = Backlog()

    init(
        _ durability: Durability, metrics: Metrics, halt: @escaping (String) -> Void,
        release: @escaping ([Writer.Outcome]) -> Void
    ) {
        // Touched by the confirming thread only.
        var failure: ProtocolError?
        let name: String
        if case .journal = durability { name = "folio-journal" } else { name = "folio-confirm" }
        let backlog = backlog
        work = WorkThread(name: name) { batches in
            defer { backlog.remove(batches.reduce(0) { $0 + $1.bytes }) }
            if failure == nil && batches.contains(where: \.needsSync) {
                do {
                    #if DEBUG
                    try Failpoint.confirmBeforeSync.check()
                    #endif
                    let started = monotonicMicroseconds()
                    try durability.makeDurable(batches.filter(\.needsSync).map(\.outcomes))
                    metrics.syncSeconds.record(Double(monotonicMicroseconds() - started) / 1_000_000)
                    #if DEBUG
                    _ = Failpoint.confirmAfterSync.hit()
                    #endif
                } catch {
                    failure = ProtocolError(.unavailable, "the write was applied but could not be flushed to disk: \(error)")
                    halt("\(durability.what) (\(error))")
                }
            }
            for batch in batches {
                guard let failure, batch.needsSync else {
                    release(batch.outcomes)
                    continue
                }
                release(batch.outcomes.map { Writer.Outcome(job: $0.job, result: (try? $0.result.get()) == nil ? $0.result : .failure(failure)) })
            }
        }
    }

    /// Hands a committed batch over; waits first while more than `Backlog.limit` bytes of events
    /// wait to be confirmed.
    func confirm(_ outcomes: [Writer.Outcome], needsSync: Bool) {
        let bytes = outcomes.reduce(0) { total, outcome in
            total + ((try? outcome.result.get())?.appended ?? []).reduce(0) { $0 + $1.canonicalEvent.count }
        }
        backlog.add(bytes)
        work.enqueue([Batch(outcomes: outcomes, needsSync: needsSync, bytes: bytes)])
    }

    /// Answers everything handed over, then ends the thread.
    func stop() { work.stop() }
}
