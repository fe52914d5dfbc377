import CLMDB
import Glibc
import Synchronization

#if DEBUG
    import Failpoints
#endif

/// An LMDB environment: one directory holding `data.mdb` and `lock.mdb`.
///
/// Opened with `MDB_NOTLS`, so read transactions may be used from any thread. Write transactions
/// belong to the thread that runs `write`; callers keep all writes on one thread. Every transaction
/// holds a shared lock on the environment's activity so that `grow(to:)` can wait until none is
/// active, as `mdb_env_set_mapsize` requires. A write transaction also holds the file's write lock,
/// which `FileReserve` takes to extend the file.
public final class Environment: @unchecked Sendable {
    public enum SyncMode: Sendable {
        /// Data and meta page are flushed at every commit (LMDB's default).
        case full
        /// `MDB_NOMETASYNC`: the meta page is not flushed; an OS crash may undo the last commit.
        case noMetaSync
        /// `MDB_NOSYNC`: nothing is flushed at commit; an OS crash may lose recent commits.
        case noSync
    }

    public struct Options: Sendable {
        public var mapSize: Int = 1 << 30
        public var maxDatabases: UInt32 = 16
        public var maxReaders: UInt32 = 512
        public var sync: SyncMode = .full
        public var readOnly = false
        public init() {}
    }

    let handle: OpaquePointer
    public let path: String
    public let syncMode: SyncMode
    let activity: UnsafeMutablePointer<pthread_rwlock_t>
    /// Held by each write transaction from begin to commit or abort, and by `FileReserve` while it
    /// writes past the end of `data.mdb`: LMDB writes the file only inside a write transaction.
    let fileWrites: UnsafeMutablePointer<pthread_mutex_t>
    /// The transactions of every `Reader` not yet released, which `close` aborts first.
    let readerRegistry: UnsafeMutablePointer<pthread_mutex_t>
    var liveReaders: Set<OpaquePointer> = []
    /// Guards `heldSnapshots`, and the setting of `exclusiveWanted`; `holdsChanged` is signalled
    /// when `heldSnapshots` falls to 0.
    let holds: UnsafeMutablePointer<pthread_mutex_t>
    let holdsChanged: UnsafeMutablePointer<pthread_cond_t>
    /// Readers that keep a snapshot open between their reads (`makeReader(keepingSnapshot:)`).
    var heldSnapshots = 0
    /// Set while `grow(to:)` waits for held snapshots to end or resizes the map: none may start.
    let exclusiveWanted = Atomic<Bool>(false)
    /// `data.mdb` opened once more, for `sync()` alone. Linux reports a failed write-back once to
    /// each open descriptor of the file (at its next `fsync`/`fdatasync`), so flushing through a
    /// descriptor of our own sees every failure since our last flush, and never takes the report
    /// away from the `fdatasync` LMDB makes in each commit on its own descriptor.
    let syncFile: Int32
    /// The first flush of `data.mdb` that failed: every later `sync()` fails with it (see `sync()`).
    private let syncFailure = Mutex<LMDBError?>(nil)

    /// Opens (creating if needed) the environment in the existing directory `path`.
    /// Calls `mdb_env_create`, `mdb_env_open`, and `mdb_env_close` if opening fails.
    public init(path: String, options: Options = Options()) throws(LMDBError) {
        if !options.readOnly {
            if access(path + "/data.mdb", F_OK) != 0 {
                try Self.createDurably(in: path, options: options)
            } else {
                Self.removeDraft(in: path)
            }
            try Self.prepareLockFile(in: path, maxReaders: Int(options.maxReaders))
        }
        try Self.checkLength(in: path)
        var env: OpaquePointer?
        try check(mdb_env_create(&env), "mdb_env_create")
        guard let env else { throw LMDBError(code: .invalid, call: "mdb_env_create") }
        do {
            try check(mdb_env_set_mapsize(env, options.mapSize), "mdb_env_set_mapsize")
            try check(mdb_env_set_maxdbs(env, options.maxDatabases), "mdb_env_set_maxdbs")
            try check(mdb_env_set_maxreaders(env, options.maxReaders), "mdb_env_set_maxreaders")
            // MDB_NOMEMINIT: pages written from malloc'd buffers are not zeroed first (the file is
            // private to its owner; LMDB's own docs call the zeroing only a privacy measure).
            var flags = UInt32(MDB_NOTLS | MDB_NOMEMINIT)
            switch options.sync {
            case .full: break
            case .noMetaSync: flags |= UInt32(MDB_NOMETASYNC)
            case .noSync: flags |= UInt32(MDB_NOSYNC)
            }
            if options.readOnly { flags |= UInt32(MDB_RDONLY) }
            try check(mdb_env_open(env, path, flags, 0o600), "mdb_env_open")
            var dead: Int32 = 0
            try check(mdb_reader_check(env, &dead), "mdb_reader_check")
        } catch {
            mdb_env_close(env)
            throw error
        }
        syncFile = open(path + "/data.mdb", O_RDONLY | O_CLOEXEC)
        guard syncFile >= 0 else {
            let code = errno
            mdb_env_close(env)
            throw LMDBError(code: .init(rawValue: code), call: "open \(path)/data.mdb")
        }
        self.handle = env
        self.path = path
        self.syncMode = options.sync
        activity = .allocate(capacity: 1)
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        // A waiting grow must not starve behind a steady stream of readers.
        pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        pthread_rwlock_init(activity, &attributes)
        pthread_rwlockattr_destroy(&attributes)
        fileWrites = .allocate(capacity: 1)
        pthread_mutex_init(fileWrites, nil)
        readerRegistry = .allocate(capacity: 1)
        pthread_mutex_init(readerRegistry, nil)
        holds = .allocate(capacity: 1)
        pthread_mutex_init(holds, nil)
        holdsChanged = .allocate(capacity: 1)
        pthread_cond_init(holdsChanged, nil)
    }

    private(set) var isClosed = false

    /// Makes a new, empty environment's `data.mdb` appear in `directory` whole and flushed, or not
    /// at all. LMDB writes a new file's two meta pages without flushing them, and the first commit
    /// flushes them a moment later: a power loss between could leave a `data.mdb` of zeros that
    /// LMDB refuses to open, ever (`MDB_INVALID`), found by the power-loss crash loop. So the file is
    /// made beside it as `data.mdb.new` (with its lock file `data.mdb.new-lock`), flushed, renamed
    /// into place, and the directory flushed. What a crash leaves of the two is removed next time.
    static func createDurably(in directory: String, options: Options) throws(LMDBError) {
        let draft = directory + "/data.mdb.new"
        removeDraft(in: directory)
        defer { unlink(draft + "-lock") }
        // As for the real one: a lock file LMDB would size and write through a map is a SIGBUS on a
        // full disk.
        try prepareLockFile(at: draft + "-lock", maxReaders: Int(options.maxReaders))
        var env: OpaquePointer?
        try check(mdb_env_create(&env), "mdb_env_create")
        guard let env else { throw LMDBError(code: .invalid, call: "mdb_env_create") }
        do {
            try check(mdb_env_set_mapsize(env, options.mapSize), "mdb_env_set_mapsize")
            try check(mdb_env_set_maxreaders(env, options.maxReaders), "mdb_env_set_maxreaders")
            try check(mdb_env_open(env, draft, UInt32(MDB_NOTLS | MDB_NOSUBDIR), 0o600), "mdb_env_open")
        } catch {
            mdb_env_close(env)
            unlink(draft)
            throw error
        }
        mdb_env_close(env)
        let file = open(draft, O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { throw LMDBError(code: .init(rawValue: errno), call: "open \(draft)") }
        do {
            defer { Glibc.close(file) }
            try flush(file, call: "fdatasync \(draft)")
        }
        guard rename(draft, directory + "/data.mdb") == 0 else {
            let code = errno
            unlink(draft)
            throw LMDBError(code: .init(rawValue: code), call: "rename \(draft)")
        }
        try flushDirectory(directory)
    }

    /// Removes what an interrupted `createDurably` left.
    static func removeDraft(in directory: String) {
        unlink(directory + "/data.mdb.new")
        unlink(directory + "/data.mdb.new-lock")
    }

    /// Creates `lock.mdb` with its blocks written, if it does not exist yet.
    ///
    /// LMDB sizes a new lock file with `ftruncate` and then writes its reader table through `mmap`:
    /// on a full disk that first write cannot get a block and kills the process with SIGBUS. Written
    /// here first, a full disk is an ENOSPC error instead. The size is LMDB 0.9's own for
    /// `maxReaders` slots (64-byte slots after a 192-byte header); a larger file only gives LMDB more
    /// slots, a smaller one LMDB extends as before. The file is written under another name and
    /// linked into place, so a process opening the environment meanwhile never sees it half written.
    static func prepareLockFile(in directory: String, maxReaders: Int) throws(LMDBError) {
        try prepareLockFile(at: directory + "/lock.mdb", maxReaders: maxReaders)
    }

    static func prepareLockFile(at path: String, maxReaders: Int) throws(LMDBError) {
        if access(path, F_OK) == 0 { return }
        let draft = path + ".new-\(getpid())"
        let file = open(draft, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard file >= 0 else { throw LMDBError(code: .init(rawValue: errno), call: "open \(draft)") }
        defer { unlink(draft) }
        let zeros = UnsafeMutableRawBufferPointer.allocate(byteCount: (maxReaders - 1) * 64 + 192, alignment: 64)
        defer { zeros.deallocate() }
        zeros.initializeMemory(as: UInt8.self, repeating: 0)
        defer { Glibc.close(file) }
        try writeFully(file, UnsafeRawBufferPointer(zeros), at: 0, call: "write lock.mdb")
        if link(draft, path) != 0 && errno != EEXIST {
            throw LMDBError(code: .init(rawValue: errno), call: "link lock.mdb")
        }
    }

    deinit {
        close()
        pthread_rwlock_destroy(activity)
        activity.deallocate()
        pthread_mutex_destroy(fileWrites)
        fileWrites.deallocate()
        pthread_mutex_destroy(readerRegistry)
        readerRegistry.deallocate()
        pthread_mutex_destroy(holds)
        holds.deallocate()
        pthread_cond_destroy(holdsChanged)
        holdsChanged.deallocate()
    }

    /// Closes the environment (`mdb_env_close`). Every transaction must have ended, and every
    /// `Reader` been released; nothing may use the environment afterwards.
    public func close() {
        pthread_rwlock_wrlock(activity)
        defer { pthread_rwlock_unlock(activity) }
        guard !isClosed else { return }
        isClosed = true
        // A reader still held (it must not be in use) ends here, while its reader table is mapped.
        pthread_mutex_lock(readerRegistry)
        for txn in liveReaders { mdb_txn_abort(txn) }
        liveReaders.removeAll()
        pthread_mutex_unlock(readerRegistry)
        mdb_env_close(handle)
        Glibc.close(syncFile)
    }

    /// Opens (or creates) a named database. Call once per name, at start-up, before other threads use it.
    /// The main (unnamed) database, which holds the named databases' records. LMDB rewrites its
    /// page in every commit that changes any named database, so a small record kept in it costs a
    /// commit no page of its own. Its keys must not be the names of named databases; a key holding
    /// a 0 byte is skipped by `mdb_stat -a` and `mdb_dump -a`.
    public func mainDatabase() throws -> Database {
        try write { (txn) throws(LMDBError) in
            var dbi: MDB_dbi = 0
            try check(mdb_dbi_open(txn.handle, nil, 0, &dbi), "mdb_dbi_open")
            return Database(handle: dbi, name: "")
        }
    }

    public func openDatabase(_ name: String, create: Bool = true) throws -> Database {
        try write { (txn) throws(LMDBError) in
            var dbi: MDB_dbi = 0
            try check(mdb_dbi_open(txn.handle, name, create ? UInt32(MDB_CREATE) : 0, &dbi), "mdb_dbi_open")
            return Database(handle: dbi, name: name)
        }
    }

    /// Runs `body` in a new read-only transaction, aborted when `body` returns.
    /// The transaction and every buffer it hands out are valid only inside `body`.
    @discardableResult
    public func read<R>(_ body: (Transaction) throws -> R) throws -> R {
        pthread_rwlock_rdlock(activity)
        defer { pthread_rwlock_unlock(activity) }
        var txn: OpaquePointer?
        try check(mdb_txn_begin(handle, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin")
        defer { mdb_txn_abort(txn) }
        return try body(Transaction(handle: txn!))
    }

    /// Runs `body` in a write transaction and commits it if `body` returns; aborts it and rethrows the
    /// first error if `body` throws. Must always be called from the same thread.
    @discardableResult
    public func write<R>(_ body: (Transaction) throws -> R) throws -> R {
        pthread_rwlock_rdlock(activity)
        defer { pthread_rwlock_unlock(activity) }
        pthread_mutex_lock(fileWrites)
        defer { pthread_mutex_unlock(fileWrites) }
        var txn: OpaquePointer?
        try check(mdb_txn_begin(handle, nil, 0, &txn), "mdb_txn_begin")
        let result: R
        do {
            result = try body(Transaction(handle: txn!))
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
        try check(mdb_txn_commit(txn), "mdb_txn_commit")
        return result
    }

    /// A read transaction kept between uses (`mdb_txn_reset` / `mdb_txn_renew`), for a thread that reads
    /// often: renewing skips finding a reader slot. Use it from one thread at a time.
    ///
    /// `keepingSnapshot`: the transaction stays open after a `read`, and the next `read` runs in it
    /// again, without LMDB's renewal and the look-up of each database's root that follows one, as long
    /// as nothing has been committed since (`read` compares the snapshot with the newer meta page, so
    /// a read never misses a commit made before it started). The owner calls `releaseSnapshot()`
    /// before it waits for anything (an event loop: before `epoll_wait`), so that the snapshot pins
    /// old pages only briefly, and so that `grow(to:)`, which waits until no snapshot is held, is not
    /// kept waiting.
    public func makeReader(keepingSnapshot: Bool = false) throws(LMDBError) -> Reader {
        var txn: OpaquePointer?
        pthread_rwlock_rdlock(activity)
        defer { pthread_rwlock_unlock(activity) }
        try check(mdb_txn_begin(handle, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin")
        mdb_txn_reset(txn)
        pthread_mutex_lock(readerRegistry)
        liveReaders.insert(txn!)
        pthread_mutex_unlock(readerRegistry)
        return Reader(environment: self, handle: txn!, keepsSnapshot: keepingSnapshot)
    }

    public final class Reader: @unchecked Sendable {
        let environment: Environment
        let handle: OpaquePointer
        let keepsSnapshot: Bool
        /// The transaction is open between reads, counted in `environment.heldSnapshots`.
        private var holding = false

        init(environment: Environment, handle: OpaquePointer, keepsSnapshot: Bool) {
            self.environment = environment
            self.handle = handle
            self.keepsSnapshot = keepsSnapshot
        }

        /// A reader released after its environment was closed was aborted by `close`, while the
        /// reader table it points into was still mapped (aborting it after was a crash at shutdown).
        deinit {
            pthread_rwlock_rdlock(environment.activity)
            defer { pthread_rwlock_unlock(environment.activity) }
            if holding { environment.endHold() }
            guard !environment.isClosed else { return }
            pthread_mutex_lock(environment.readerRegistry)
            environment.liveReaders.remove(handle)
            pthread_mutex_unlock(environment.readerRegistry)
            mdb_txn_abort(handle)
        }

        /// Runs `body` in a snapshot that holds every commit made before the call: without
        /// `keepsSnapshot` a fresh one, released when `body` returns.
        public func read<R>(_ body: (Transaction) throws -> R) throws -> R {
            pthread_rwlock_rdlock(environment.activity)
            defer { pthread_rwlock_unlock(environment.activity) }
            guard !environment.isClosed else {
                throw LMDBError(code: .init(rawValue: EINVAL), call: "mdb_txn_renew on a closed environment")
            }
            if holding {
                if !environment.exclusiveWanted.load(ordering: .relaxed) {
                    if mdb_txn_id(handle) != environment.lastCommittedTransaction {
                        mdb_txn_reset(handle)
                        do { try check(mdb_txn_renew(handle), "mdb_txn_renew") } catch {
                            holding = false
                            environment.endHold()
                            throw error
                        }
                    }
                    return try body(Transaction(handle: handle))
                }
                dropSnapshot()
            } else if keepsSnapshot && environment.startHold() {
                do { try check(mdb_txn_renew(handle), "mdb_txn_renew") } catch {
                    environment.endHold()
                    throw error
                }
                holding = true
                return try body(Transaction(handle: handle))
            }
            try check(mdb_txn_renew(handle), "mdb_txn_renew")
            defer { mdb_txn_reset(handle) }
            return try body(Transaction(handle: handle))
        }

        /// Ends the snapshot kept since the last `read`, if any (see `makeReader(keepingSnapshot:)`).
        public func releaseSnapshot() {
            guard holding else { return }
            pthread_rwlock_rdlock(environment.activity)
            defer { pthread_rwlock_unlock(environment.activity) }
            dropSnapshot()
        }

        /// Under the activity lock.
        private func dropSnapshot() {
            holding = false
            if !environment.isClosed { mdb_txn_reset(handle) }
            environment.endHold()
        }
    }

    /// The transaction of the last commit, from the newer meta page (LMDB writes it before it
    /// publishes the commit to new readers): call it under the activity lock.
    var lastCommittedTransaction: Int {
        var info = MDB_envinfo()
        mdb_env_info(handle, &info)
        return info.me_last_txnid
    }

    /// Counts a snapshot about to be kept open between reads, unless `grow(to:)` wants the map.
    func startHold() -> Bool {
        pthread_mutex_lock(holds)
        defer { pthread_mutex_unlock(holds) }
        guard !exclusiveWanted.load(ordering: .relaxed) else { return false }
        heldSnapshots += 1
        return true
    }

    func endHold() {
        pthread_mutex_lock(holds)
        defer { pthread_mutex_unlock(holds) }
        heldSnapshots -= 1
        if heldSnapshots == 0 { pthread_cond_broadcast(holdsChanged) }
    }

    /// Keeps new snapshots from being held, and waits until the held ones end: each ends at its
    /// reader's next `read` or `releaseSnapshot()`.
    private func endHeldSnapshots() {
        pthread_mutex_lock(holds)
        defer { pthread_mutex_unlock(holds) }
        exclusiveWanted.store(true, ordering: .relaxed)
        while heldSnapshots > 0 { pthread_cond_wait(holdsChanged, holds) }
    }

    private func allowHeldSnapshots() {
        pthread_mutex_lock(holds)
        defer { pthread_mutex_unlock(holds) }
        exclusiveWanted.store(false, ordering: .relaxed)
    }

    /// Runs `body` while no write transaction runs, so that LMDB writes nothing to `data.mdb` meanwhile,
    /// and while the map cannot be resized (so `info` may be read).
    func excludingWrites<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_rwlock_rdlock(activity)
        defer { pthread_rwlock_unlock(activity) }
        pthread_mutex_lock(fileWrites)
        defer { pthread_mutex_unlock(fileWrites) }
        return try body()
    }

    /// Bytes of `data.mdb` on disk, which may run past the pages in use (see `FileReserve`).
    public var fileSize: Int {
        var status = stat()
        return fstat(syncFile, &status) == 0 ? Int(status.st_size) : 0
    }

    /// Grows the map to `size` bytes, waiting until no transaction of this process is active
    /// (`mdb_env_set_mapsize`). Call it from the writer's thread, outside any transaction.
    public func grow(to size: Int) throws(LMDBError) {
        endHeldSnapshots()
        defer { allowHeldSnapshots() }
        pthread_rwlock_wrlock(activity)
        defer { pthread_rwlock_unlock(activity) }
        #if DEBUG
            if Failpoint.lmdbGrowMap.hit() {
                throw LMDBError(code: .init(rawValue: ENOMEM), call: "mdb_env_set_mapsize (failpoint)")
            }
        #endif
        try check(mdb_env_set_mapsize(handle, size), "mdb_env_set_mapsize")
    }

    /// Flushes `data.mdb` to disk: what commits wrote without flushing (the meta page under
    /// `.noMetaSync`, everything under `.noSync`). Calls `fdatasync` on a descriptor of its own, so
    /// it throws if any write-back of the file failed since the last `sync()`, whoever wrote the
    /// pages: then committed pages may be missing from the disk although the page cache still
    /// shows them, and a later flush may succeed without writing them (Linux does not keep failed
    /// pages dirty). Never retry a failed `sync()` as if it could make the data durable.
    ///
    /// So a failure is final: once one `sync()` failed, every later one throws the same error
    /// without flushing, whoever calls it (a checkpoint, the check after a failed commit, a
    /// shutdown), and nothing can vouch for the file again in this process.
    public func sync() throws(LMDBError) {
        if let failed = syncFailure.withLock({ $0 }) {
            throw LMDBError(code: failed.code, call: "fdatasync data.mdb (failed before, so final)")
        }
        do {
            try flush(syncFile, call: "fdatasync data.mdb")
        } catch {
            syncFailure.withLock { $0 = $0 ?? error }
            throw error
        }
    }

    /// After a failed commit, whether the environment may go on taking writes: throws if LMDB has
    /// marked it unusable (a meta page could not be written, `MDB_PANIC`), or if a write-back of
    /// `data.mdb` failed (see `sync()`), so that pages of earlier commits may not be on disk. A
    /// commit that failed before its meta page was written, in a `pwrite` refused for lack of space,
    /// leaves the last commit intact and passes: writes may resume once there is room.
    public func checkWritable() throws(LMDBError) {
        try checkUsable()
        try sync()
    }

    /// `checkWritable` without its flush: throws if LMDB has marked the environment unusable
    /// (`MDB_PANIC`), for a caller that flushes `data.mdb` its own way (a journal's, which marks
    /// the flush as under way first).
    public func checkUsable() throws(LMDBError) {
        pthread_rwlock_rdlock(activity)
        defer { pthread_rwlock_unlock(activity) }
        var txn: OpaquePointer?
        try check(mdb_txn_begin(handle, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin")
        mdb_txn_abort(txn)
    }

    /// Copies the environment into `path/data.mdb` (`mdb_env_copyfd2`, `MDB_CP_COMPACT` if `compact`)
    /// from one read snapshot while writers go on. The copy is written as `data.mdb.partial`,
    /// flushed, and only then renamed to `data.mdb`, and the directory flushed: a copy that returned
    /// survives an OS crash, and a process killed part-way leaves no `data.mdb` whose meta page
    /// points past its end, which LMDB would map and fault on (SIGBUS) when opened.
    public func copy(to path: String, compact: Bool) throws(LMDBError) {
        let partial = path + "/data.mdb.partial"
        let file = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard file >= 0 else { throw LMDBError(code: .init(rawValue: errno), call: "open \(partial)") }
        do throws(LMDBError) {
            var closed = false
            defer { if !closed { Glibc.close(file) } }
            do {
                pthread_rwlock_rdlock(activity)
                defer { pthread_rwlock_unlock(activity) }
                try check(mdb_env_copyfd2(handle, file, compact ? UInt32(MDB_CP_COMPACT) : 0), "mdb_env_copyfd2")
            }
            try flush(file, call: "fdatasync backup data.mdb")
            closed = true
            if Glibc.close(file) != 0 { throw LMDBError(code: .init(rawValue: errno), call: "close \(partial)") }
        } catch {
            unlink(partial)
            throw error
        }
        guard rename(partial, path + "/data.mdb") == 0 else {
            let code = errno
            unlink(partial)
            throw LMDBError(code: .init(rawValue: code), call: "rename \(partial)")
        }
        try Self.flushDirectory(path)
    }

    /// `fsync` of a directory, so that the entries made in it survive an OS crash.
    public static func flushDirectory(_ path: String) throws(LMDBError) {
        let directory = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { throw LMDBError(code: .init(rawValue: errno), call: "open \(path)") }
        defer { Glibc.close(directory) }
        while fsync(directory) != 0 {
            if errno != EINTR { throw LMDBError(code: .init(rawValue: errno), call: "fsync \(path)") }
        }
    }

    /// Clears reader slots left by processes that died (`mdb_reader_check`); returns how many.
    @discardableResult
    public func clearStaleReaders() throws(LMDBError) -> Int {
        var dead: Int32 = 0
        try check(mdb_reader_check(handle, &dead), "mdb_reader_check")
        return Int(dead)
    }

    /// `info` for a caller outside any transaction: waits while the map is being resized, which moves it.
    public var currentInfo: EnvironmentInfo {
        pthread_rwlock_rdlock(activity)
        defer { pthread_rwlock_unlock(activity) }
        return info
    }

    /// Reads the meta page through the map: call it inside a transaction, or use `currentInfo`.
    public var info: EnvironmentInfo {
        var info = MDB_envinfo()
        var stat = MDB_stat()
        mdb_env_info(handle, &info)
        mdb_env_stat(handle, &stat)
        return EnvironmentInfo(
            mapSize: info.me_mapsize, pageSize: Int(stat.ms_psize),
            usedSize: (info.me_last_pgno + 1) * Int(stat.ms_psize),
            maxReaders: Int(info.me_maxreaders), readerSlotsUsed: Int(info.me_numreaders),
            lastTransaction: info.me_last_txnid)
    }
}

public struct EnvironmentInfo: Sendable {
    public let mapSize: Int
    public let pageSize: Int
    /// Bytes of the map in use: pages up to the last one written.
    public let usedSize: Int
    public let maxReaders: Int
    /// The high-water mark of reader slots (`me_numreaders`), not the readers active now.
    public let readerSlotsUsed: Int
    public let lastTransaction: Int
}

/// `fdatasync`, retrying on EINTR (which reports no write-back failure).
func flush(_ file: Int32, call: String) throws(LMDBError) {
    while fdatasync(file) != 0 {
        if errno != EINTR { throw LMDBError(code: .init(rawValue: errno), call: call) }
    }
}

/// `pwrite` until all of `bytes` is written at `offset`, retrying on EINTR and short writes.
func writeFully(_ file: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int, call: String) throws(LMDBError) {
    var written = 0
    while written < bytes.count {
        let result = pwrite(file, bytes.baseAddress! + written, bytes.count - written, off_t(offset + written))
        if result < 0 {
            if errno == EINTR { continue }
            throw LMDBError(code: .init(rawValue: errno), call: call)
        }
        written += result
    }
}
