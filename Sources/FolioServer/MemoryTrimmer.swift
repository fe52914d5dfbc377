import CFolioSystem
import Glibc
import Synchronization

/// Gives the memory clients no longer hold back to the system, not only to the allocator.
///
/// glibc keeps freed heap in its arenas, and once a large block (a line buffer grown towards
/// `--max-line`) is freed it raises its mmap threshold to that size, so later buffers of that size
/// come from the arenas too. After 100 clients streamed over-long lines, foliod kept 110 MiB of
/// heap while it held 2 KiB for clients. Once a second this compares the resident heap and what
/// malloc holds free (`mallinfo2`) with their lowest since the last trim: when either has grown by
/// `trimAfterBytes`, and malloc holds at least that much free, `malloc_trim(0)` hands the free
/// pages of every arena back. Both are watched, not client memory, because some
/// memory is freed later than a client lets go (a closed connection's long line is still decoded,
/// its writes still applied), and pages trimmed once are reused and freed again without malloc's
/// free total changing.
///
/// It does not wait for clients to let go (it once waited until malloc held twice `clientMemory`,
/// so that a storm in progress kept its buffers): with 20 clients sending lines just under `--max-line` and leaving, the arenas kept what
/// the decoders and the writer had freed until the storm ended, and foliod's heap reached 430–500
/// MiB while it held 260 MiB for clients; trimming whenever 16 MiB are free, 345–370 MiB. Fixing
/// glibc's mmap threshold at 256 KiB instead (every large block mapped and unmapped on its own)
/// kept it at 300 MiB, but every over-long line then cost fresh pages: foliod refused 2.4× fewer
/// of them and served the other clients at a quarter of the rate during a storm of them.
///
/// Under pressure, once the resident heap reaches `--client-memory`, it looks every 100 ms instead
/// of every second: in a storm of abandoned lines near `--max-line` the decoders and the writer
/// free 100–150 MiB a second, and a second's worth kept in the arenas took the debug build's heap
/// to 415–445 MiB (526 MiB once, beside the whole test suite), past what PROTOCOL §1 allows;
/// looking every 100 ms, 350–370 MiB. While the heap is below half the mark it reads /proc once a
/// second, as before (ten reads a second cost 340 instructions a create in callgrind's count).
final class MemoryTrimmer: @unchecked Sendable {
    static let trimAfterBytes = 16 << 20

    /// Resident heap from which it looks every 100 ms: `--client-memory`, changed by a reload.
    let pressureBytes: Atomic<Int>
    private let lock = ConditionLock()
    private var stopping = false
    private var thread: pthread_t?

    /// `lineBuffers`: told once a second, so that buffers no long line took for a second are freed.
    init(lineBuffers: LineBuffers? = nil, pressureBytes: Int = .max) {
        self.pressureBytes = Atomic(pressureBytes)
        thread = startThread(name: "folio-trim") { [self] in
            var residentLow = Self.residentHeapBytes() ?? 0
            var freeLow = Int(folio_malloc_free_bytes())
            var tenths = 0
            // The heap at the last look: below half the mark, the next look is a second away
            // (reading /proc ten times a second would cost an idle foliod for nothing).
            var lastResident = residentLow
            while !lock.withLock({ stopping }) {
                usleep(100_000)
                tenths += 1
                let pressure = self.pressureBytes.load(ordering: .relaxed)
                guard tenths >= 10 || lastResident >= pressure / 2 else { continue }
                guard let resident = Self.residentHeapBytes() else { continue }
                lastResident = resident
                guard tenths >= 10 || resident >= pressure else { continue }
                if tenths >= 10 {
                    tenths = 0
                    lineBuffers?.releaseIdle()
                }
                let free = Int(folio_malloc_free_bytes())
                residentLow = min(residentLow, resident)
                freeLow = min(freeLow, free)
                let grown = max(resident - residentLow, free - freeLow)
                guard grown >= Self.trimAfterBytes && free >= Self.trimAfterBytes else { continue }
                _ = folio_malloc_trim()
                residentLow = Self.residentHeapBytes() ?? resident
                lastResident = residentLow
                freeLow = Int(folio_malloc_free_bytes())
            }
        }
    }

    func stop() {
        lock.withLock { stopping = true }
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    /// Resident pages that are not file-backed (`/proc/self/statm`: resident − shared), in bytes:
    /// the heap and stacks, not the LMDB map.
    static func residentHeapBytes() -> Int? {
        let fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        let fields = String(decoding: buffer[..<count], as: UTF8.self).split(separator: " ").compactMap { Int($0) }
        guard fields.count >= 3 else { return nil }
        return (fields[1] - fields[2]) * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
