import CFolioSystem
import CLMDB
import Glibc
import Synchronization

/// Zeros written past the last page of an environment's `data.mdb`, so that commits overwrite the
/// file instead of growing it.
///
/// A commit that writes past the end of the file makes its `fdatasync` put the new size and block
/// mapping on disk as well: on ext4 a second synchronous write ahead of the cache flush. Measured on
/// our machines, 16 KiB appended and synced cost ~190 µs, the same write into space already written
/// ~95 µs. `fallocate` does not help: its unwritten extents need the same metadata write when first
/// written. So the reserve writes real zeros, and syncs them, ahead of LMDB.
///
/// Zeros go only beyond every page LMDB has written, and only while no write transaction runs (the
/// environment's file write lock), so LMDB never sees them: to LMDB the tail is room for pages it has
/// not allocated yet, and copies and backups take only allocated pages. They are written with
/// `O_DIRECT` where the file system allows it, so they never sit in the page cache for a commit's
/// `fdatasync` to wait on.
public final class FileReserve: @unchecked Sendable {
    public struct Policy: Sendable {
        /// The reserve is kept at `used bytes / 8`, bounded by these.
        public var minimum = 8 << 20
        public var maximum = 64 << 20
        /// Bytes written per hold of the file write lock.
        public var step = 1 << 20

        public init() {}

        func target(used: Int) -> Int { min(maximum, max(minimum, used / 8)) }
    }

    private let environment: Environment
    private let policy: Policy
    /// One step of zeros, never written to after `init`.
    private let zeros: UnsafeMutableRawBufferPointer
    /// `data.mdb` opened for direct writes, or -1 where `O_DIRECT` is refused.
    private let directFile: Int32
    /// `data.mdb` opened for buffered writes, where direct ones are refused. Never LMDB's own
    /// descriptor: a failed write-back is reported once per descriptor, and a flush here must not
    /// take that report from the `fdatasync` of LMDB's next commit (see `Environment.sync()`).
    private let bufferedFile: Int32
    /// Cleared when a direct write is refused (EINVAL), for a file system that opens with `O_DIRECT`
    /// but does not take it.
    private let writesDirectly: Atomic<Bool>
    /// The file's size as last written here or seen here; LMDB may have grown it since.
    private let fileEnd = Atomic<Int>(0)

    public init(environment: Environment, policy: Policy = Policy()) {
        self.environment = environment
        self.policy = policy
        zeros = .allocate(byteCount: policy.step, alignment: 4096)
        zeros.initializeMemory(as: UInt8.self, repeating: 0)
        directFile = folio_open_direct_write(environment.path + "/data.mdb")
        bufferedFile = open(environment.path + "/data.mdb", O_WRONLY | O_CLOEXEC)
        writesDirectly = Atomic(directFile >= 0)
    }

    deinit {
        zeros.deallocate()
        if directFile >= 0 { close(directFile) }
        if bufferedFile >= 0 { close(bufferedFile) }
    }

    /// Reserved bytes beyond LMDB's last page.
    public var reservedBytes: Int { max(0, fileEnd.load(ordering: .relaxed) - environment.currentInfo.usedSize) }

    /// Whether the reserve fell below half its target: cheap enough to ask after every commit.
    public var isLow: Bool {
        let used = environment.currentInfo.usedSize
        return fileEnd.load(ordering: .relaxed) - used < policy.target(used: used) / 2
    }

    /// Writes zeros until the reserve reaches its target (or the map's end), one step per hold of the
    /// file write lock, each synced outside the lock so that a commit's own sync never has more than
    /// one step of them to flush. Throws the first failed `pwrite` or `fdatasync` (e.g. ENOSPC); what
    /// was written before stays, harmlessly.
    public func topUp() throws(LMDBError) {
        while true {
            let file = writesDirectly.load(ordering: .relaxed) ? directFile : bufferedFile
            guard file >= 0 else {
                throw LMDBError(code: .init(rawValue: EBADF), call: "open data.mdb for the reserve")
            }
            let more = try environment.excludingWrites { () throws(LMDBError) -> Bool in
                let info = environment.info
                var status = stat()
                guard fstat(file, &status) == 0 else { throw LMDBError(code: .init(rawValue: errno), call: "fstat") }
                let start = max(Int(status.st_size), info.usedSize)
                let length = min(policy.step, info.mapSize - start) / 4096 * 4096
                guard start - info.usedSize < policy.target(used: info.usedSize), length > 0 else {
                    fileEnd.store(start, ordering: .relaxed)
                    return false
                }
                do throws(LMDBError) {
                    try writeFully(file, UnsafeRawBufferPointer(rebasing: zeros[..<length]), at: start, call: "pwrite")
                } catch  where error.code.rawValue == EINVAL && file == directFile {
                    writesDirectly.store(false, ordering: .relaxed)
                    return true
                }
                fileEnd.store(start + length, ordering: .relaxed)
                return true
            }
            guard more else { return }
            try flush(file, call: "fdatasync")
        }
    }
}
