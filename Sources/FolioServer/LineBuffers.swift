import Synchronization

/// Buffers with room for a whole long line, kept for the next long line once the request decoded
/// from one is done with it (a file piece, once written). Without them every 700 KB piece of an
/// upload took a fresh block of `--max-line` from malloc, which glibc, having raised its mmap
/// threshold past that size, served from its arenas and kept once freed; with the threshold fixed
/// below it, every piece paid for fresh pages instead (a third slower). Reused buffers cost neither:
/// 8 clients uploading 100 MiB each in pieces peaked at 42–55 MiB of RSS, where answered pieces
/// waiting in the connections' queues and fresh blocks had taken 385–460 MiB (`docs/BENCHMARKS.md`).
/// At most `kept` buffers and `keptBytes` are held, each as large as the longest line foliod takes,
/// of which only the pages lines have touched are resident. Thread-safe.
final class LineBuffers: Sendable {
    static let kept = 32
    /// ... and at most this many bytes of them: memory no client holds, which the abandoned-writes
    /// storm counts against foliod (its heap within 1.5 × `--client-memory` + 64 MiB), and which
    /// with lines of 8 MiB would otherwise reach 256 MiB. 8 clients uploading in pieces (lines of
    /// 2 MiB) peaked at 41 MiB of RSS with it.
    static let keptBytes = 16 << 20

    /// The buffers kept, and whether one was taken since the last `releaseIdle`.
    private let free = Mutex<(buffers: [[UInt8]], bytes: Int, taken: Bool)>(([], 0, false))

    /// An empty buffer with room for at least `capacity` bytes.
    func take(capacity: Int) -> [UInt8] {
        while var buffer = free.withLock({ free in
            free.taken = true
            let buffer = free.buffers.popLast()
            free.bytes -= buffer?.capacity ?? 0
            return buffer
        }) {
            guard buffer.capacity >= capacity else { continue }
            // Emptied here, where the pool held the only reference: in place, not a fresh block.
            buffer.removeAll(keepingCapacity: true)
            return buffer
        }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(capacity)
        return buffer
    }

    /// Keeps `buffer` for a later `take`, unless `kept` buffers or `keptBytes` are kept already.
    func give(_ buffer: [UInt8]) {
        free.withLock { free in
            guard free.buffers.count < Self.kept, free.bytes + buffer.capacity <= Self.keptBytes else { return }
            free.buffers.append(buffer)
            free.bytes += buffer.capacity
        }
    }

    /// Frees the kept buffers if none was taken since the last call (`MemoryTrimmer`, once a
    /// second): memory that clients sending long lines held goes back once they stop.
    func releaseIdle() {
        var gone: [[UInt8]] = []
        free.withLock { free in
            if !free.taken {
                swap(&gone, &free.buffers)
                free.bytes = 0
            }
            free.taken = false
        }
        gone.removeAll()  // freed outside the lock
    }

    /// Buffers kept now, and the bytes they can hold.
    var keptBuffers: (count: Int, bytes: Int) {
        free.withLock { free in (free.buffers.count, free.buffers.reduce(0) { $0 + $1.capacity }) }
    }
}
