import FolioProtocol
import LMDB

/// Makes committed batches durable before they are answered: takes every batch committed since its
/// last sync, syncs the environment once (`mdb_env_sync`, which puts their meta pages on disk), then
/// hands them on in commit order. Runs beside the writer, so the writer applies the next batch while
/// the last one is being synced.
final class SyncConfirmer: Sendable {
    private struct Batch {
        let outcomes: [Writer.Outcome]
        /// The batch committed data (a batch of failures only waits for its turn).
        let needsSync: Bool
    }

    private let work: WorkThread<Batch>

    init(environment: Environment, log: Log, release: @escaping ([Writer.Outcome]) -> Void) {
        work = WorkThread(name: "folio-confirm") { batches in
            var failure: ProtocolError?
            if batches.contains(where: \.needsSync) {
                do {
                    try environment.sync()
                } catch {
                    log.error("flushing committed writes failed: \(error)")
                    failure = ProtocolError(.unavailable, "the write was applied but could not be flushed to disk: \(error)")
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
