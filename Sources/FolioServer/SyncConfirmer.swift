import FolioProtocol
import LMDB

#if DEBUG
import Failpoints
#endif

/// Makes committed batches durable before they are answered: takes every batch committed since its
/// last sync, syncs the environment once (`Environment.sync`, which puts their meta pages on disk),
/// then hands them on in commit order. Runs beside the writer, so the writer applies the next batch
/// while the last one is being synced.
///
/// A failed sync is final. The pages it was to flush may be gone from the disk while the page cache
/// still shows them, and Linux reports the failure only once: a later sync can succeed without
/// writing them. So the batches it covered, and every batch after it, are answered `unavailable`
/// (applied, visible, but in doubt), none is shown to watchers, and `halt` stops the writer.
final class SyncConfirmer: Sendable {
    private struct Batch {
        let outcomes: [Writer.Outcome]
        /// The batch committed data (a batch of failures only waits for its turn).
        let needsSync: Bool
    }

    private let work: WorkThread<Batch>

    init(
        environment: Environment, halt: @escaping (String) -> Void,
        release: @escaping ([Writer.Outcome]) -> Void
    ) {
        // Touched by the confirming thread only.
        var failure: ProtocolError?
        work = WorkThread(name: "folio-confirm") { batches in
            if failure == nil && batches.contains(where: \.needsSync) {
                do {
                    #if DEBUG
                    try Failpoint.confirmBeforeSync.check()
                    #endif
                    try environment.sync()
                    #if DEBUG
                    _ = Failpoint.confirmAfterSync.hit()
                    #endif
                } catch {
                    failure = ProtocolError(.unavailable, "the write was applied but could not be flushed to disk: \(error)")
                    halt("a failed flush of data.mdb (\(error))")
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
