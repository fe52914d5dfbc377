import FolioProtocol
import FolioStore
import LMDB
import Synchronization

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
/// - `.journal`: the writer hands each transaction's events over (`journal`) before it commits,
///   so that the journal's write and sync run while LMDB commits (without syncing; the
///   `Checkpointer` makes `data.mdb` durable), and a `cancel` if that commit then fails. A round
///   first answers the batches whose records earlier rounds synced, then appends the records
///   handed over since and syncs the journal once (`Journal.append`), then answers the batches
///   those cover: a batch's answer is queued after its record (and after its cancel), so every
///   batch a round answers was committed (or failed) and its record synced.
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
    }

    /// What the writer queues, in its order.
    private enum Item {
        /// A committed batch's outcomes, to answer once durable.
        case batch(Batch)
        /// With the journal: a transaction's record, before its commit.
        case record(Journal.Entry)
    }

    private struct Batch {
        let outcomes: [Writer.Outcome]
        /// The batch committed data (a batch of failures only waits for its turn).
        let needsSync: Bool
        /// With the journal: its commit failed after its record was handed over, and a cancel of
        /// the record is queued before it. If the journal's sync fails, the cancel may not be on
        /// disk, and a restart may apply the record: its writes are then in doubt, not refused.
        let cancelled: Bool
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
        /// Batches handed over and not answered yet, read without the lock.
        private let batches = Atomic<Int>(0)

        func add(_ count: Int) {
            lock.withLock {
                while bytes > 0 && bytes + count > Self.limit { lock.wait() }
                bytes += count
            }
            batches.add(1, ordering: .relaxed)
        }

        func remove(_ count: Int) {
            batches.subtract(1, ordering: .releasing)
            lock.withLock {
                bytes -= count
                lock.broadcast()
            }
        }

        /// Every batch handed over is answered.
        var isEmpty: Bool { batches.load(ordering: .acquiring) == 0 }
    }

    private let work: WorkThread<Item>
    private let backlog = Backlog()
    /// Whether the writer hands records over (`.journal`).
    let journals: Bool

    init(
        _ durability: Durability, metrics: Metrics, halt: @escaping (String) -> Void,
        release: @escaping ([Writer.Outcome]) -> Void
    ) {
        // Touched by the confirming thread only.
        var failure: ProtocolError?
        var failedSync: (any Error)?
        let journaling: Bool
        if case .journal = durability { journaling = true } else { journaling = false }
        journals = journaling
        let backlog = backlog

        /// Makes durable what the round holds (.lmdb: the batches' commits; .journal: the records).
        func makeDurable(_ items: ArraySlice<Item>) {
            guard failure == nil else { return }
            var entries: [Journal.Entry] = []
            var syncs = false
            for item in items {
                switch item {
                case .batch(let batch): syncs = syncs || batch.needsSync
                case .record(let entry): entries.append(entry)
                }
            }
            if case .journal = durability { syncs = !entries.isEmpty }
            guard syncs else { return }
            do {
                #if DEBUG
                    try Failpoint.confirmBeforeSync.check()
                #endif
                let started = monotonicMicroseconds()
                switch durability {
                case .lmdb(let environment): try environment.sync()
                case .journal(let journal): try journal.append(entries)
                }
                metrics.syncSeconds.record(Double(monotonicMicroseconds() - started) / 1_000_000)
                #if DEBUG
                    _ = Failpoint.confirmAfterSync.hit()
                #endif
            } catch {
                failure = ProtocolError(
                    .unavailable, "the write was applied but could not be flushed to disk: \(error)")
                failedSync = error
                halt("\(durability.what) (\(error))")
            }
        }

        /// Answers the batches among `items`, in order.
        func answer(_ items: ArraySlice<Item>) {
            for case .batch(let batch) in items {
                backlog.remove(batch.bytes)
                if batch.cancelled, let failedSync {
                    let doubt = ProtocolError(
                        .unavailable,
                        "the write's commit failed, and the journal could not be flushed after it: it may be stored or not (\(failedSync))"
                    )
                    release(batch.outcomes.map { Writer.Outcome(job: $0.job, result: .failure(doubt)) })
                    continue
                }
                // Once a sync failed, no write is answered as stored, not even one that needed no
                // sync of its own (a retry answered from its request key may repeat a write whose
                // sync is the one that failed).
                guard let failure else {
                    release(batch.outcomes)
                    continue
                }
                release(
                    batch.outcomes.map {
                        Writer.Outcome(
                            job: $0.job, result: (try? $0.result.get()) == nil ? $0.result : .failure(failure))
                    })
            }
        }

        work = WorkThread(
            name: journaling ? "folio-journal" : "folio-confirm", spinMicroseconds: journaling ? Self.anticipation : 0
        ) { items in
            // With the journal, the batches before the round's first record were covered by
            // earlier rounds' syncs: answered before this round's sync, not after it.
            let covered =
                journaling
                ? (items.firstIndex { if case .record = $0 { return true } else { return false } } ?? items.count) : 0
            answer(items[..<covered])
            makeDurable(items[covered...])
            answer(items[covered...])
        }
    }

    /// How long the journal's thread waits, spinning, for a record `expectRecord` announced: a
    /// write's execution takes tens of microseconds, a big one longer; past this the thread
    /// sleeps, and the record wakes it as before.
    static let anticipation: UInt64 = 150

    /// With the journal: the writer starts on a batch of `writes` writes, and `waiting` more wait
    /// behind it. When that batch is all foliod has to write (one write, none waiting, every
    /// batch before it answered), the journal's thread is woken now and waits for the record
    /// spinning, so that its wake-up overlaps the write's execution instead of delaying the sync
    /// the write waits for. Under load the thread is busy syncing earlier batches, and the writes
    /// need the CPU a spin would take: it is not woken ahead (measured: a spin for every batch of
    /// one or two writes cost 5% of the creates at 16 clients).
    /// Returns whether it woke the thread.
    @discardableResult
    func expectRecord(writes: Int, waiting: Int) -> Bool {
        guard journals, writes == 1, waiting == 0, backlog.isEmpty else { return false }
        work.anticipate()
        return true
    }

    /// With the journal: the record of the transaction the writer is about to commit (inside it,
    /// after its last change), or the cancel of that record after its commit failed.
    func journal(_ entry: Journal.Entry) {
        work.enqueue([.record(entry)])
    }

    /// Hands a committed batch over; waits first while more than `Backlog.limit` bytes of events
    /// wait to be confirmed. Call outside any write transaction: the journal's thread may wait for
    /// one to end (a checkpoint pins the last commit).
    func confirm(_ outcomes: [Writer.Outcome], needsSync: Bool, cancelled: Bool = false) {
        let bytes = outcomes.reduce(0) { total, outcome in
            total + ((try? outcome.result.get())?.appended ?? []).reduce(0) { $0 + $1.canonicalEvent.count }
        }
        backlog.add(bytes)
        work.enqueue([.batch(Batch(outcomes: outcomes, needsSync: needsSync, cancelled: cancelled, bytes: bytes))])
    }

    /// Answers everything handed over, then ends the thread.
    func stop() { work.stop() }
}
