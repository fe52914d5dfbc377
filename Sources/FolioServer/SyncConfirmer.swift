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
    }

    private let work: WorkThread<Batch>

    init(
        _ durability: Durability, metrics: Metrics, halt: @escaping (String) -> Void,
        release: @escaping ([Writer.Outcome]) -> Void
    ) {
        // Touched by the confirming thread only.
        var failure: ProtocolError?
        let name: String
        if case .journal = durability { name = "folio-journal" } else { name = "folio-confirm" }
        work = WorkThread(name: name) { batches in
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

    func confirm(_ outcomes: [Writer.Outcome], needsSync: Bool) {
        work.enqueue([Batch(outcomes: outcomes, needsSync: needsSync)])
    }

    /// Answers everything handed over, then ends the thread.
    func stop() { work.stop() }
}
