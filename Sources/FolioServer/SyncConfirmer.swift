import FolioProtocol
import Glibc
import LMDB

/// Makes committed batches durable before they are answered: takes every batch committed since its
/// last sync, syncs the environment once (`mdb_env_sync`, which puts their meta pages on disk), then
/// hands them on in commit order. Runs beside the writer, so the writer applies the next batch while
/// the last one is being synced.
final class SyncConfirmer: @unchecked Sendable {
    private let environment: Environment
    private let log: Log
    private let release: ([Writer.Outcome]) -> Void
    private let lock = ConditionLock()
    private var waiting: [(outcomes: [Writer.Outcome], needsSync: Bool)] = []
    private var stopping = false
    private var thread: pthread_t?

    init(environment: Environment, log: Log, release: @escaping ([Writer.Outcome]) -> Void) {
        self.environment = environment
        self.log = log
        self.release = release
    }

    func start() {
        thread = startThread(name: "folio-confirm") { [self] in run() }
    }

    /// Answers everything handed over, then ends the thread.
    func stop() {
        lock.withLock {
            stopping = true
            lock.signal()
        }
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    /// `needsSync`: the batch committed data (a batch of failures only waits for its turn).
    func confirm(_ outcomes: [Writer.Outcome], needsSync: Bool) {
        lock.withLock {
            waiting.append((outcomes, needsSync))
            lock.signal()
        }
    }

    private func run() {
        while true {
            let batches = lock.withLock {
                while waiting.isEmpty && !stopping { lock.wait() }
                let batches = waiting
                waiting.removeAll(keepingCapacity: true)
                return batches
            }
            if batches.isEmpty { return }
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
}
