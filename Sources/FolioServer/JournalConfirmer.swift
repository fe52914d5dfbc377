import FolioProtocol
import FolioStore
import Glibc

#if DEBUG
import Failpoints
#endif

/// `SyncConfirmer`'s counterpart with `--journal on`: takes every batch committed since its last
/// round, appends their events to the journal and syncs it once (`Journal.append`), then hands
/// them on in commit order. LMDB committed them without syncing; the `Checkpointer` makes
/// `data.mdb` durable now and then. A failed append or sync is final, as in `SyncConfirmer`.
final class JournalConfirmer: Sendable {
    private struct Batch {
        let outcomes: [Writer.Outcome]
        let needsSync: Bool
    }

    private let work: WorkThread<Batch>

    init(journal: Journal, metrics: Metrics, halt: @escaping (String) -> Void, release: @escaping ([Writer.Outcome]) -> Void) {
        var failure: ProtocolError?
        work = WorkThread(name: "folio-journal") { batches in
            if failure == nil && batches.contains(where: \.needsSync) {
                do {
                    #if DEBUG
                    try Failpoint.confirmBeforeSync.check()
                    #endif
                    let started = monotonicMicroseconds()
                    try journal.append(batches.filter(\.needsSync).map { batch in batch.outcomes.flatMap { (try? $0.result.get())?.appended ?? [] } })
                    metrics.syncSeconds.record(Double(monotonicMicroseconds() - started) / 1_000_000)
                    #if DEBUG
                    _ = Failpoint.confirmAfterSync.hit()
                    #endif
                } catch {
                    failure = ProtocolError(.unavailable, "the write was applied but could not be made durable: \(error)")
                    halt("a failed write or flush of the journal (\(error))")
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

    func stop() { work.stop() }
}

/// Checkpoints the journal (`Journal.checkpoint`) four times a second while writes come, and at
/// once when a quarter of the journal is in use; a last one when stopped, so that a restart
/// applies nothing. Between checkpoints it starts the write-back of `data.mdb` every 20 ms, so
/// that a checkpoint's flush is short and does not hold up the journal's syncs behind a burst of
/// pages. A failed checkpoint is final: `data.mdb` may not be on disk.
final class Checkpointer: @unchecked Sendable {
    static let interval: UInt64 = 250_000_000

    private let journal: Journal
    private let lock = ConditionLock()
    private var stopping = false
    private var failed = false
    private var thread: pthread_t?
    private let halt: (String) -> Void

    init(journal: Journal, halt: @escaping (String) -> Void) {
        self.journal = journal
        self.halt = halt
        thread = startThread(name: "folio-checkpoint") { [self] in
            while !lock.withLock({ stopping }) {
                usleep(20_000)
                guard journal.wantsCheckpoint(interval: Self.interval) else {
                    if journal.liveBytes > 0 { journal.startWriteback() }
                    continue
                }
                guard checkpoint() else { return }
            }
        }
    }

    private func checkpoint() -> Bool {
        do {
            try journal.checkpoint()
            return true
        } catch {
            lock.withLock { failed = true }
            halt("a failed checkpoint of data.mdb (\(error))")
            return false
        }
    }

    /// Ends the thread, then, if `final`, checkpoints what the journal holds (never after a failed
    /// checkpoint, nor after writes halted: a flush after a failed one may succeed without the
    /// pages, and a checkpoint would then vouch for them). Call after the last batch was appended.
    func stop(final: Bool) {
        lock.withLock { stopping = true }
        if let thread { pthread_join(thread, nil) }
        thread = nil
        if final && !lock.withLock({ failed }) && journal.liveBytes > 0 { _ = checkpoint() }
    }
}
