import Glibc
import LMDB
import Synchronization

/// Tops up `data.mdb`'s reserve of written zeros (see `FileReserve`) on a thread of its own, so the
/// writer's part is to ask, after each commit, whether the reserve runs low. After a failure (a full
/// disk, say) it logs and leaves the file alone for ten seconds; LMDB then grows the file itself.
/// A failed flush here is a failed write-back of `data.mdb`, which may have been LMDB's pages: it is
/// reported to every descriptor of the file, so the writer's next commit or flush fails as well and
/// stops foliod there (see `Writer`); this thread need not.
final class ReserveKeeper: @unchecked Sendable {
    private static let retryDelay: Int64 = 10_000_000_000

    private let reserve: FileReserve
    private let log: Log
    /// Set once in `init`.
    private var work: WorkThread<Void>!
    /// A top-up is queued or running.
    private let pending = Atomic<Bool>(false)
    /// Monotonic nanoseconds before which no top-up starts.
    private let quietUntil = Atomic<Int64>(0)

    init(environment: Environment, log: Log) {
        reserve = FileReserve(environment: environment)
        self.log = log
        work = WorkThread(name: "folio-reserve") { [unowned self] _ in topUp() }
        topUpIfLow()
    }

    /// Called by the writer after each commit.
    func topUpIfLow() {
        guard Self.now() >= quietUntil.load(ordering: .relaxed), reserve.isLow,
            pending.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged
        else { return }
        work.enqueue([()])
    }

    /// Ends the thread after the top-up in progress, if any.
    func stop() { work.stop() }

    private func topUp() {
        defer { pending.store(false, ordering: .releasing) }
        do {
            try reserve.topUp()
        } catch {
            log.error("could not extend data.mdb ahead of its pages (\(error)); trying again in 10 s")
            quietUntil.store(Self.now() + Self.retryDelay, ordering: .relaxed)
        }
    }

    private static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}
