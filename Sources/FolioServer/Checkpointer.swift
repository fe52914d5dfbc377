import FolioStore
import Glibc

/// Checkpoints the journal (`Journal.checkpoint`) four times a second while writes come, and at
/// once when a quarter of the journal is in use; a last one when stopped, so that a restart
/// applies nothing. Between checkpoints, while the journal holds records, it starts the write-back
/// of `data.mdb` every millisecond, so that a checkpoint's flush is short and each journal sync
/// meets at most a millisecond's pages on their way to the disk: started every 20 ms, a burst of
/// 20 ms of commits' pages held up the syncs behind it, and one client's create had a p99 of 2 ms
/// against 0.8 ms (docs/BENCHMARKS.md, "Write-back a millisecond at a time"). Idle, it looks every
/// 20 ms. A failed checkpoint is final: `data.mdb` may not be on disk.
final class Checkpointer: @unchecked Sendable {
    static let interval: UInt64 = 250_000_000
    /// Microseconds between two looks while the journal holds records, and while it holds none.
    static let busyPause: UInt32 = 1_000
    static let idlePause: UInt32 = 20_000

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
            var pause = Self.idlePause
            while !lock.withLock({ stopping }) {
                usleep(pause)
                guard journal.wantsCheckpoint(interval: Self.interval) else {
                    if journal.liveBytes > 0 {
                        journal.startWriteback()
                        pause = Self.busyPause
                    } else {
                        pause = Self.idlePause
                    }
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
