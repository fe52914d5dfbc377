import FolioJSON
import FolioModel
import Foundation
import LMDB

/// A Folio data directory: the event log and everything derived from it, in one LMDB environment.
///
/// Reads run in snapshots (`read`, or a `Reader` per thread); all writes run in `write`, on one thread.
public final class Store: @unchecked Sendable {
    public struct Options: Sendable {
        public var mapSize = 1 << 30
        public var sync: Environment.SyncMode = .full
        /// How long a request key is remembered, in milliseconds of event time (`RequestIndex`).
        public var requestKeyRetention: Int64 = 24 * 3600 * 1000
        /// Durable commits through the journal (`Journal`): once it is open, LMDB commits without
        /// syncing, and the caller makes each commit durable with `journal.append` before answering
        /// it. Until then (recovery, the first checkpoint) commits sync as `sync` says.
        public var journal = false
        /// Bytes of the journal ring, when one is created.
        public var journalSize = Journal.defaultSize
        /// The journal's records written with `O_DIRECT` where the file system allows it
        /// (docs/DURABILITY.md, "Files"); `FOLIO_JOURNAL_DIRECT=0` in the environment turns it off too.
        public var journalDirectWrites = true
        /// The machine's boot id (`BootID.current`), which decides with `DATA/resume` whether a start
        /// after a crash may resume at LMDB's last commit (`ResumeMarker`); nil: it never does.
        public var bootID: String? = BootID.current()
        public init() {}
    }

    public let directory: String
    public let environment: Environment
    public let options: Options
    let databases: StoreDatabases
    let definitions = DefinitionCache()
    let applier: EventApplier
    /// The contents of files, in `DATA/blobs`.
    public let blobs: BlobStore
    /// Held while a backup runs (`backup(to:)`).
    let backups = NSLock()
    /// Set when the store was opened with `Options.journal`.
    public private(set) var journal: Journal?
    /// What opening found of a checkpoint and journal left by an earlier run, if any.
    public private(set) var recovery: Journal.Recovery?
    /// When `write` last cleared stale reader slots (uptime, ns); touched by the writing thread only.
    private var lastReaderCheck: UInt64 = 0

    public init(directory: String, options: Options = Options()) throws {
        let (created, problem) = Self.makeDirectories(directory)
        // A new data directory's name is as durable as the store in it.
        for made in created { try Environment.flushDirectory((made as NSString).deletingLastPathComponent) }
        if let problem { throw StoreError.unusable("cannot create \(problem)") }
        var environmentOptions = Environment.Options()
        environmentOptions.mapSize = options.mapSize
        // With the journal, commits stop syncing only once its first checkpoint is on disk: until
        // then nothing would bring a store back whose unsynced pages were half written.
        environmentOptions.sync = options.sync
        self.directory = directory
        blobs = BlobStore(directory: directory + "/blobs")
        // A checkpoint means the last run journaled. After a crash of foliod alone on this boot,
        // with no flush of data.mdb failed or cut short since, LMDB's last commit is whole in the
        // page cache and holds every answered write: the start resumes there (the flush first
        // reports a failed write-back nothing has looked at). Otherwise data.mdb is made its
        // checkpointed state again before LMDB opens it, and pinned at once, before any write can
        // reuse a page of it. The marker says `dirty` before either writes anything.
        let checkpoint = try CheckpointFile.read(directory + "/" + Journal.checkpointName)
        let marker = ResumeMarker(directory: directory, bootID: options.bootID)
        var resuming = false
        if let checkpoint {
            let clean = marker.allowsResuming(directory)
            try marker.clear()
            resuming = clean && (try? Environment.flushData(in: directory)) != nil
            if !resuming { try Environment.restoreMeta(checkpoint.metaPage, in: directory) }
        }
        let environment = try Environment(path: directory, options: environmentOptions)
        self.environment = environment
        let pin = checkpoint == nil || resuming ? nil : try environment.pin { _ in }.0
        databases = try StoreDatabases(environment)
        applier = EventApplier(databases, definitions: definitions, requestRetention: options.requestKeyRetention)
        self.options = options
        // (A store resumed is of this format: the marker names it. Converting one would write
        // before the checkpoint below, with the old checkpoint's pages unpinned.)
        try checkFormat()
        (journal, recovery) = try Journal.open(
            store: self, checkpoint: checkpoint, pin: pin, resuming: resuming, marker: marker, enabled: options.journal,
            size: options.journalSize, directWrites: options.journalDirectWrites)
        if journal != nil { try environment.stopSyncingCommits() }
    }

    private func checkFormat() throws {
        let key = Array("format".utf8)
        let stored = try environment.read { txn in
            try txn.get(databases.meta, key).map {
                try $0.leadingLittleEndian(UInt32.self, of: "the store's format record")
            }
        }
        switch stored {
        case StoreDatabases.formatVersion?: return
        case 5?, 6?, 7?:
            // Format 6 only adds merge rounds, which a store of format 5 has none of; format 7 adds
            // a round's chunks, and reads a round of format 6 as one without them; format 8 keeps
            // the view op stream's state in the main database (it moves there), and its ops in
            // records of several (each becomes a record of one).
            try environment.write { txn in
                if let state = try txn.get(databases.viewOps.ops, ViewBuffer.formerStateKey).map({ Array($0) }) {
                    try txn.put(databases.viewOps.main, ViewBuffer.stateKey, state)
                    try txn.delete(databases.viewOps.ops, ViewBuffer.formerStateKey)
                }
                _ = try ViewBuffer.convertFormerOps(txn, databases.viewOps.ops)
                var value: [UInt8] = []
                value.appendLittleEndian(StoreDatabases.formatVersion)
                try txn.put(databases.meta, key, value)
            }
        case 1?, 2?, 3?, 4?:
            // The log is the same; only derived state changed shape.
            try environment.write { txn in
                var value: [UInt8] = []
                value.appendLittleEndian(StoreDatabases.formatVersion)
                try txn.put(databases.meta, key, value)
            }
            try rebuild()
        case let other?:
            throw StoreError.unusable(
                "\(directory) holds store format \(other); this foliod reads format \(StoreDatabases.formatVersion)")
        case nil:
            try environment.write { txn in
                var value: [UInt8] = []
                value.appendLittleEndian(StoreDatabases.formatVersion)
                try txn.put(databases.meta, key, value)
            }
        }
    }

    /// Works out every view's ops not yet merged into its tree (see `ViewBuffer`), so that the
    /// first read of a view after a start does not: foliod calls it before it serves. Returns the
    /// views and the ops. Costs about what the ops are: 50 ms for 65,536.
    @discardableResult
    public func resolvePendingViewOps() throws -> (views: Int, ops: Int) {
        try read { snapshot in
            let resolved = try CountedTree.resolveAll(snapshot.storeTxn)
            return (resolved.trees, resolved.ops)
        }
    }

    /// Runs `body` on a consistent snapshot, released when `body` returns.
    public func read<R>(_ body: (Snapshot) throws -> R) throws -> R {
        try environment.read { txn in try body(Snapshot(store: self, txn: txn)) }
    }

    /// A reusable snapshot source for one thread. `keepingSnapshot`: see
    /// `Environment.makeReader(keepingSnapshot:)`; the owner calls `releaseSnapshot()` before it waits.
    public func makeReader(keepingSnapshot: Bool = false) throws -> Reader {
        Reader(store: self, reader: try environment.makeReader(keepingSnapshot: keepingSnapshot))
    }

    public final class Reader: @unchecked Sendable {
        let store: Store
        let reader: Environment.Reader
        /// What this reader's snapshots of one committed state have read (`ReadMemo`).
        let memo = ReadMemo()

        init(store: Store, reader: Environment.Reader) {
            self.store = store
            self.reader = reader
        }

        public func read<R>(_ body: (Snapshot) throws -> R) throws -> R {
            try reader.read { txn in try body(Snapshot(store: store, txn: txn, memo: memo)) }
        }

        /// Ends the snapshot a reader made with `keepingSnapshot` holds between reads, if any.
        public func releaseSnapshot() { reader.releaseSnapshot() }
    }

    /// Runs `body` in one write transaction, committed (durably, unless the store was opened with a
    /// weaker sync mode) when `body` returns. `beforeCommit` runs last inside the transaction, with
    /// `body`'s result, just before the commit (the writer hands the journal its record there); if
    /// it throws, nothing is committed. Call from one thread only.
    @discardableResult
    public func write<R>(_ body: (StoreWriter) throws -> R, beforeCommit: (R) throws -> Void = { _ in }) throws -> R {
        clearStaleReadersNowAndThen()
        var resolutions: [(tree: UInt32, delta: BufferedDelta)] = []
        var roundOps: ViewBuffer.RoundOps??
        let result = try environment.write { txn in
            let writer = try StoreWriter(store: self, txn: txn)
            let result = try body(writer)
            try writer.finish()
            try beforeCommit(result)
            resolutions = writer.txn.cache?.bufferMemoList ?? []
            roundOps = writer.txn.cache?.roundOpsChange
            return result
        }
        if let roundOps { databases.deltas.setRoundOps(roundOps) }
        // Committed: the views' pending ops as the write resolved them (a unique view's checks)
        // serve the next snapshots, which would otherwise resolve them again.
        for (tree, delta) in resolutions { databases.deltas.install(delta, tree: tree) }
        return result
    }

    /// At most once a second, clears the reader slots of processes that died inside a read
    /// transaction (`mdb_reader_check`): such a slot pins its snapshot, so no page freed after it
    /// could be reused and data.mdb grew with every write until the next start-up cleared it.
    private func clearStaleReadersNowAndThen() {
        let now = DispatchTime.now().uptimeNanoseconds
        guard now - lastReaderCheck >= 1_000_000_000 else { return }
        lastReaderCheck = now
        // A failed check changes nothing; the next one may succeed.
        _ = try? environment.clearStaleReaders()
    }

    /// Doubles the map, for a write that failed with `MDB_MAP_FULL`. Waits for open snapshots to end.
    public func growMap() throws {
        try environment.grow(to: environment.info.mapSize * 2)
    }

    /// Runs `attempt` (one or more write transactions that leave nothing behind when LMDB aborts
    /// them, and can run again) and, each time it fails with `MDB_MAP_FULL`, doubles the map and
    /// runs it again, up to 16 times. The store's own replays use it (rebuild, import, verify's
    /// scratch store, the journal's records at start), so that a store that outgrew the map it is
    /// opened with (the daemon's grows as it fills; LMDB opens a larger store with a map just the
    /// size of its data) can still be rebuilt, verified and imported. The daemon's writer grows its
    /// map the same way for the batches it retries.
    func growingMap<R>(_ attempt: () throws -> R) throws -> R {
        var grown = 0
        while true {
            do {
                return try attempt()
            } catch let error as LMDBError where error.code == .mapFull && grown < 16 {
                grown += 1
                try growMap()
            }
        }
    }
}

extension Store {
    /// Flushes `data.mdb`: through the journal when there is one, which keeps the resume marker
    /// true across the flush (`Journal.flushData`).
    public func flushData() throws {
        if let journal { try journal.flushData() } else { try environment.sync() }
    }

    /// After a failed commit, whether writes may go on (`Environment.checkWritable`), with the
    /// flush made by `flushData`, so that with the journal a failed one leaves the resume marker
    /// `dirty` and no later start trusts the page cache.
    public func checkWritable() throws {
        try environment.checkUsable()
        try flushData()
    }

    /// Closes the LMDB environment. Release every `Reader` first.
    public func close() {
        journal?.close()
        environment.close()
    }
}
