import CFolioSystem
import CLMDB
import Glibc

/// What a journal of our own needs from LMDB to let commits skip their syncs (`MDB_NOSYNC`) and
/// still recover an intact state after an OS crash (docs/DURABILITY.md):
///
/// - a **pin**: a read transaction on the last commit, which keeps every page of that snapshot
///   from being reused (LMDB reuses a freed page only once no reader may still see it), so that
///   once those pages are flushed nothing can overwrite them on disk until the pin is released;
/// - the snapshot's **meta page**, copied when it is pinned: later commits overwrite the two meta
///   slots in turn, and without syncs the disk may hold any of them after a crash, pointing at
///   pages that never reached it;
/// - **restoring** that copy into both slots before the environment is opened again, which makes
///   the pinned snapshot LMDB's current state.
extension Environment {
    /// A pinned snapshot: its transaction id and its meta page as LMDB wrote it.
    public final class Pin: @unchecked Sendable {
        let environment: Environment
        private var handle: OpaquePointer?
        public let transaction: Int
        /// The whole meta page (one page of `data.mdb`), as it was when pinned.
        public let metaPage: [UInt8]

        init(environment: Environment, handle: OpaquePointer, transaction: Int, metaPage: [UInt8]) {
            self.environment = environment
            self.handle = handle
            self.transaction = transaction
            self.metaPage = metaPage
        }

        /// Ends the read transaction: the snapshot's pages may be reused from the next commit on.
        public func release() {
            pthread_rwlock_rdlock(environment.activity)
            defer { pthread_rwlock_unlock(environment.activity) }
            guard let handle else { return }
            self.handle = nil
            guard !environment.isClosed else { return }
            pthread_mutex_lock(environment.readerRegistry)
            environment.liveReaders.remove(handle)
            pthread_mutex_unlock(environment.readerRegistry)
            mdb_txn_abort(handle)
        }

        deinit { release() }
    }

    /// Pins the last committed snapshot. `inspect` reads it, in the same transaction, before the
    /// pin is parked (what it returns must not point into the map). No write transaction runs
    /// meanwhile, so the snapshot is exactly the last commit and its meta slot holds it.
    public func pin<R>(_ inspect: (Transaction) throws -> R) throws -> (Pin, R) {
        try excludingWrites {
            var txn: OpaquePointer?
            try check(mdb_txn_begin(handle, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin")
            guard let txn else { throw LMDBError(code: .invalid, call: "mdb_txn_begin") }
            do {
                let transaction = mdb_txn_id(txn)
                let result = try inspect(Transaction(handle: txn))
                let page = try metaPage(of: transaction)
                pthread_mutex_lock(readerRegistry)
                liveReaders.insert(txn)
                pthread_mutex_unlock(readerRegistry)
                return (Pin(environment: self, handle: txn, transaction: transaction, metaPage: page), result)
            } catch {
                mdb_txn_abort(txn)
                throw error
            }
        }
    }

    /// Stops syncing at commit (`MDB_NOSYNC`), once a journal has taken over durability.
    public func stopSyncingCommits() throws(LMDBError) {
        try check(mdb_env_set_flags(handle, UInt32(MDB_NOSYNC), 1), "mdb_env_set_flags")
    }

    /// Starts writing back what commits left in the page cache (`sync_file_range`, not waiting),
    /// so that the next `sync()` has little left to write. Reports nothing: a failed write-back is
    /// seen by the next `sync()`.
    public func startWriteback() {
        _ = folio_start_writeback(syncFile, 0, 0)
    }

    /// Writes back `data.mdb`'s dirty pages and waits, polling, until at most `pages` of them are
    /// dirty or under write-back, or `timeout` nanoseconds have passed, so that a flush after it has
    /// little left to write and returns soon. Unlike a flush, it neither reports nor clears a
    /// failed write-back (`cachestat`, Linux 6.5; on older kernels it returns at once, false).
    @discardableResult
    public func settleWriteback(atMost pages: UInt64, timeout: UInt64) -> Bool {
        var started = timespec()
        clock_gettime(CLOCK_MONOTONIC, &started)
        while true {
            _ = folio_start_writeback(syncFile, 0, 0)
            var dirty: UInt64 = 0
            var writeback: UInt64 = 0
            guard folio_dirty_pages(syncFile, &dirty, &writeback) == 0 else { return false }
            if dirty + writeback <= pages { return true }
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let elapsed =
                (Int64(now.tv_sec) - Int64(started.tv_sec)) * 1_000_000_000 + Int64(now.tv_nsec)
                - Int64(started.tv_nsec)
            if elapsed >= Int64(timeout) { return false }
            usleep(500)
        }
    }

    /// The meta slot that holds `transaction`, read from the file (the page cache has what LMDB
    /// wrote, synced or not).
    private func metaPage(of transaction: Int) throws(LMDBError) -> [UInt8] {
        let size = info.pageSize
        for slot in 0..<2 {
            let page = try Self.readPage(syncFile, slot, size: size, call: "read meta page of data.mdb")
            if MetaPage.transaction(page) == transaction { return page }
        }
        throw LMDBError(code: .corrupted, call: "no meta page of data.mdb holds transaction \(transaction)")
    }

    static func readPage(_ file: Int32, _ index: Int, size: Int, call: String) throws(LMDBError) -> [UInt8] {
        var page = [UInt8](repeating: 0, count: size)
        var done = 0
        while done < size {
            let count = page.withUnsafeMutableBytes {
                pread(file, $0.baseAddress! + done, size - done, off_t(index * size + done))
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw LMDBError(code: .init(rawValue: errno), call: call)
            }
            if count == 0 {
                throw LMDBError(code: .corrupted, call: "\(call): the file ends at \(index * size + done)")
            }
            done += count
        }
        return page
    }

    /// Writes `metaPage` (from a `Pin`) into both meta slots of `directory/data.mdb` and flushes
    /// it, so that the pinned snapshot is what LMDB opens. Only while no process has the
    /// environment open. LMDB itself starts a new file with two equal meta pages; its next commit
    /// takes the other slot as usual.
    public static func restoreMeta(_ metaPage: [UInt8], in directory: String) throws {
        let path = directory + "/data.mdb"
        guard MetaPage.isMeta(metaPage) else {
            throw LMDBError(code: .invalid, call: "restore meta page of \(path): not a meta page")
        }
        let file = open(path, O_RDWR | O_CLOEXEC)
        guard file >= 0 else { throw LMDBError(code: .init(rawValue: errno), call: "open \(path)") }
        defer { Glibc.close(file) }
        for slot in 0..<2 {
            var page = metaPage
            page.withUnsafeMutableBytes {
                $0.storeBytes(of: UInt64(slot).littleEndian, toByteOffset: 0, as: UInt64.self)
            }
            try page.withUnsafeBytes { bytes in
                try writeFully(file, bytes, at: slot * metaPage.count, call: "write meta page of \(path)")
            }
        }
        try flush(file, call: "fdatasync \(path)")
    }

    /// The identity of `data.mdb`: a copy of the file, or one put back in its place, is another
    /// file, whatever it holds.
    public var dataFileIdentity: FileIdentity? { FileIdentity(syncFile) }

    /// The identity of `directory/data.mdb`, nil if it cannot be read.
    public static func dataFileIdentity(in directory: String) -> FileIdentity? {
        let file = open(directory + "/data.mdb", O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { Glibc.close(file) }
        return FileIdentity(file)
    }

    /// Flushes `directory/data.mdb` (`fdatasync`) before any process opens the environment: it
    /// reports a write-back of the file that failed since no `fsync` looked (the kernel reports
    /// such a failure to the next file opened on it, once).
    public static func flushData(in directory: String) throws(LMDBError) {
        let path = directory + "/data.mdb"
        let file = open(path, O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { throw LMDBError(code: .init(rawValue: errno), call: "open \(path)") }
        defer { Glibc.close(file) }
        try flush(file, call: "fdatasync \(path)")
    }

    /// Refuses a `directory/data.mdb` that ends before a root page its current meta page names:
    /// LMDB would map it and fault (SIGBUS) on the first read of that page, where this names the
    /// file. Such a file was cut short, or put back from another time than its meta page (or its
    /// checkpoint's), or lost pages to a power cut that its commits did not sync for. (Only the
    /// roots: a root is written by the commit that made it, while the last page number counted may
    /// be a page freed in the transaction that took it and never written.)
    public static func checkLength(in directory: String) throws(LMDBError) {
        let path = directory + "/data.mdb"
        let file = open(path, O_RDONLY | O_CLOEXEC)
        guard file >= 0 else {
            if errno == ENOENT { return }
            throw LMDBError(code: .init(rawValue: errno), call: "open \(path)")
        }
        defer { Glibc.close(file) }
        var status = stat()
        guard fstat(file, &status) == 0 else { throw LMDBError(code: .init(rawValue: errno), call: "fstat \(path)") }
        let size = Int(getpagesize())
        // A file too short to hold both meta pages is LMDB's to judge (a fresh file is drafted whole).
        guard status.st_size >= 2 * size else { return }
        let pages = [
            try readPage(file, 0, size: size, call: "read meta page of \(path)"),
            try readPage(file, 1, size: size, call: "read meta page of \(path)"),
        ]
        guard
            let current = pages.filter(MetaPage.isMeta).max(by: { MetaPage.transaction($0) < MetaPage.transaction($1) })
        else { return }
        let filePages = Int(status.st_size) / size
        for root in MetaPage.roots(current) where root >= filePages {
            throw LMDBError(
                code: .corrupted,
                call:
                    "open \(path): its meta page (transaction \(MetaPage.transaction(current))) has a root at page \(root), "
                    + "past the end of the file (\(filePages) pages): it was cut short or put back from another state; restore a backup"
            )
        }
    }
}

/// The parts of an LMDB 0.9 meta page we read (lmdb's `MDB_page` header of 16 bytes, then `MDB_meta`:
/// magic u32, version u32, address, map size, two `MDB_db` of 48 bytes, last page, transaction id).
enum MetaPage {
    static let magicOffset = 16
    static let transactionOffset = 16 + 4 + 4 + 8 + 8 + 2 * 48 + 8
    static let magic: UInt32 = 0xBEEF_C0DE
    /// `P_META` in the page header's flags (u16 at offset 10).
    static let metaFlag: UInt16 = 0x08

    static func isMeta(_ page: [UInt8]) -> Bool {
        guard page.count >= transactionOffset + 8 else { return false }
        return page.withUnsafeBytes { bytes in
            UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: magicOffset, as: UInt32.self)) == magic
                && UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: 10, as: UInt16.self)) & metaFlag != 0
        }
    }

    /// The root pages of the free and main databases (`md_root` of each `MDB_db`, at 40 bytes into
    /// it; `P_INVALID`, all ones, for an empty one).
    static func roots(_ page: [UInt8]) -> [Int] {
        page.withUnsafeBytes { bytes in
            [0, 1].compactMap { index in
                let root = UInt64(
                    littleEndian: bytes.loadUnaligned(
                        fromByteOffset: 16 + 4 + 4 + 8 + 8 + index * 48 + 40, as: UInt64.self))
                return root == UInt64.max ? nil : Int(root)
            }
        }
    }

    static func transaction(_ page: [UInt8]) -> Int {
        guard isMeta(page) else { return -1 }
        return page.withUnsafeBytes {
            Int(UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: transactionOffset, as: UInt64.self)))
        }
    }
}

/// A file's device, inode number and birth time (nanoseconds; 0 where the file system keeps
/// none): a file removed and another made in its place may get its inode number, not its birth.
public struct FileIdentity: Equatable, Sendable, CustomStringConvertible {
    public let device: UInt64
    public let inode: UInt64
    public let birth: UInt64

    init?(_ file: Int32) {
        var device: UInt64 = 0
        var inode: UInt64 = 0
        var birth: UInt64 = 0
        guard folio_file_identity(file, &device, &inode, &birth) == 0 else { return nil }
        self.device = device
        self.inode = inode
        self.birth = birth
    }

    public var description: String { "dev=\(device) ino=\(inode) born=\(birth)" }
}
