import CFolioSystem
import Glibc

/// Gives the memory clients no longer hold back to the system, not only to the allocator.
///
/// glibc keeps freed heap in its arenas, and once a large block (a line buffer grown towards
/// `--max-line`) is freed it raises its mmap threshold to that size, so later buffers of that size
/// come from the arenas too. After 100 clients streamed over-long lines, foliod kept 110 MiB of
/// heap while it held 2 KiB for clients. Ten times a second this looks at `clientMemory`; when it
/// has fallen by `trimAfterBytes` from its highest since the last trim, `malloc_trim(0)` hands the
/// free pages of every arena back, at most once a second. It costs nothing while clients hold
/// steady.
final class MemoryTrimmer: @unchecked Sendable {
    static let trimAfterBytes = 16 << 20

    private let lock = ConditionLock()
    private var stopping = false
    private var thread: pthread_t?

    init(statistics: ServerStatistics) {
        thread = startThread(name: "folio-trim") { [self] in
            var highest = 0
            var sinceTrim = 0
            while !lock.withLock({ stopping }) {
                usleep(100_000)
                sinceTrim += 100
                let held = statistics.clientMemory.load(ordering: .relaxed)
                highest = max(highest, held)
                if highest - held >= Self.trimAfterBytes && sinceTrim >= 1000 {
                    _ = folio_malloc_trim()
                    highest = held
                    sinceTrim = 0
                }
            }
        }
    }

    func stop() {
        lock.withLock { stopping = true }
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }
}
