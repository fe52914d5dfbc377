import FolioModel
import Glibc
import LMDB

/// Durable writes after one sync (docs/DURABILITY.md): LMDB commits without syncing
/// (`MDB_NOSYNC`), and each write transaction's events are appended to the journal, a ring file
/// of our own, while it commits (a cancel follows if the commit fails); the journal is synced once
/// per group of commits before any of them is answered. Now and then a **checkpoint** makes
/// `data.mdb` itself durable and lets the journal's space be reused:
///
/// 1. note the journal's next free position T (every record before it belongs to a transaction
///    that ends before step 2: records are handed over inside their transaction);
/// 2. pin the last commit S (`Environment.pin`: its pages can no longer be reused) and copy its
///    meta page;
/// 3. flush `data.mdb`: every page of S is on disk, and stays there while the pin holds;
/// 4. write {S's meta page, S, the log head in S, T} to `checkpoint` and flush it;
/// 5. release the previous pin, and free the journal before T.
///
/// After any crash, opening the store (`open`) writes the checkpoint's meta page back into `data.mdb` (whatever
/// the disk holds of later commits may point at pages that never reached it), which makes S the
/// state LMDB opens, intact because its pages were flushed and none was overwritten since; then it
/// applies, with the same applier as every write, each whole journal record from T on whose
/// events follow the log's head, checking each event's chain hash, and stops at the first record
/// that is not whole; a record followed by its cancel is skipped. A record is the events of one
/// commit, applied all or nothing, so a batch is never split. Every answered write was in a synced
/// record, or in `data.mdb` at a checkpoint.
public final class Journal: @unchecked Sendable {
    public static let journalName = "journal"
    public static let checkpointName = "checkpoint"
    public static let defaultSize = 8 << 20

    private let environment: Environment
    private let events: Database
    private let directory: String
    private let ring: JournalRing
    private let checkpoints: CheckpointFile
    /// Says whether a start after a crash may resume at LMDB's last commit (`ResumeMarker`).
    private let marker: ResumeMarker

    /// Guards the positions, touched by the appending thread and by checkpoints.
    private let state = PThreadMutex()
    /// The next free virtual position.
    private var next: UInt64
    /// Where the records after the last durable checkpoint begin: the live part is `tail..<next`.
    private var tail: UInt64

    /// Serializes checkpoints; guards what follows.
    private let checkpointing = PThreadMutex()
    private var pinned: Environment.Pin?
    private var last: CheckpointFile.Checkpoint
    private var lastCheckpointTime = monotonicNanoseconds()
    /// Checkpoints taken since the journal was opened (guarded by `checkpointing`).
    private var checkpointsTaken = 0
    /// Checkpoints taken since the journal was opened (for `stats` and tests).
    public var checkpointCount: Int { checkpointing.locked { checkpointsTaken } }

    /// Pages of `data.mdb` (dirty or under write-back) a checkpoint's flush is left to write, and
    /// how long it waits for them to be that few first (`Environment.settleWriteback`): at most a
    /// checkpoint's interval, so that writes that keep dirtying pages faster than the disk takes
    /// them delay a checkpoint by no more than that (its flush then writes the rest, as before).
    static let settledPages: UInt64 = 256
    static let settleTimeout: UInt64 = 250_000_000

    /// Bytes of records `append` copies before it writes them.
    private static let runBytes = 1 << 20
    /// A buffer reused by `append`.
    private var buffer: [UInt8] = []

    private init(
        environment: Environment, events: Database, directory: String, ring: JournalRing, marker: ResumeMarker,
        start: UInt64,
        last: CheckpointFile.Checkpoint
    ) {
        self.environment = environment
        self.marker = marker
        self.events = events
        self.directory = directory
        self.ring = ring
        self.checkpoints = CheckpointFile(path: directory + "/" + Self.checkpointName)
        next = start
        tail = start
        self.last = last
    }

    deinit { ring.close() }

    /// Releases the pin. The store closes the journal before its environment.
    func close() {
        checkpointing.locked {
            pinned?.release()
            pinned = nil
        }
    }

    public var size: Int { ring.size }

    /// Whether records are written with `O_DIRECT` (`DirectWrites`): false on a file system that
    /// refuses it, after a refused first write, or when turned off.
    public var writesDirectly: Bool { ring.direct?.isOn ?? false }

    /// Bytes of records not yet covered by a checkpoint.
    public var liveBytes: Int { state.locked { Int(next - tail) } }

    /// The sequence of the last checkpoint.
    public var checkpointedSequence: UInt64 { checkpointing.locked { last.sequence } }

    // MARK: Appending

    /// What `append` writes: the events of a transaction about to commit, or the cancel of the
    /// last such record, whose commit failed.
    public enum Entry {
        /// A transaction's events, in order (none: nothing is written).
        case events([StoreWriter.Applied])
        /// The transaction whose record starts at this sequence did not commit.
        case cancel(firstSequence: UInt64)
    }

    /// Appends one record per entry and syncs the journal once. Call from one thread, in the
    /// writer's order: a transaction's record is handed over inside the transaction, after its
    /// last change and before its commit (so that a checkpoint, which pins the last commit while no
    /// write transaction runs, finds every record placed before its start committed or cancelled),
    /// and a cancel right after a failed commit, before anything else. A transaction too large for
    /// the ring, one for which the ring has no room, or one costly to apply again
    /// (`isCostlyToReplay`), is made durable by a checkpoint instead, which waits for its commit.
    public func append(_ entries: [Entry]) throws {
        buffer.removeAll(keepingCapacity: true)
        var runStart: UInt64 = 0
        var wrote = false
        func flushRun() throws {
            guard !buffer.isEmpty else { return }
            try buffer.withUnsafeBytes { try ring.write($0, at: runStart) }
            buffer.removeAll(keepingCapacity: true)
            wrote = true
        }
        for entry in entries {
            let length: Int
            var costly = false
            switch entry {
            case .events(let transaction):
                if transaction.isEmpty { continue }
                length =
                    JournalRing.headerSize + transaction.reduce(0) { $0 + 4 + ChainHash.size + $1.canonicalEvent.count }
                costly = Self.isCostlyToReplay(transaction)
            case .cancel:
                length = JournalRing.headerSize
            }
            if length > ring.size / 2 || costly {
                try flushRun()
                try checkpoint()
                continue
            }
            var (at, room) = state.locked { () -> (UInt64, Bool) in
                let at = ring.placement(of: length, at: next)
                return (at, ring.writtenEnd(at + UInt64(length)) - tail <= UInt64(ring.size))
            }
            if !room {
                // What this call placed so far lies before the checkpoint's start: it is covered.
                try flushRun()
                try checkpoint()
                at = state.locked { ring.placement(of: length, at: next) }
            }
            if buffer.isEmpty || at != runStart + UInt64(buffer.count) {
                try flushRun()
                runStart = at
            }
            switch entry {
            case .events(let transaction):
                JournalRing.encode(
                    transaction.lazy.map {
                        (sequence: $0.event.sequence, hash: $0.chainHash.bytes, canonical: $0.canonicalEvent)
                    }, at: at,
                    into: &buffer)
            case .cancel(let first):
                JournalRing.encodeCancel(of: first, at: at, into: &buffer)
            }
            state.locked { next = at + UInt64(length) }
            // A run is written once it holds a MiB: the records of a round of large writes are not
            // all copied into memory at once.
            if buffer.count >= Self.runBytes {
                try flushRun()
                runStart = at + UInt64(length)
            }
        }
        try flushRun()
        if wrote { try ring.sync() }
        // One large record (up to half the ring) leaves no buffer of its size behind.
        if buffer.capacity > Self.runBytes { buffer = [] }
    }

    /// Whether applying the transaction again, as a start after a crash applies the journal, could
    /// take far longer than its size says: defining a view builds its tree over every object of the
    /// collection, dropping one removes the whole tree. Such a transaction goes to `data.mdb` by a
    /// checkpoint before it is answered, never into the journal, so a restart never repeats that
    /// work: 10 views defined over 800,000 objects and a `kill -9` right after the last made the
    /// restart take 1.8 s (the issue asks for under a second), the view built again from the journal.
    static func isCostlyToReplay(_ transaction: [StoreWriter.Applied]) -> Bool {
        transaction.contains { applied in
            switch applied.event.change {
            case .viewDefined, .viewDropped: return true
            case .created, .updated, .deleted, .schemaDefined, .schemaDropped, .filePut, .fileDeleted: return false
            }
        }
    }

    /// Whether a checkpoint is due: the journal is a quarter full, or `interval` has passed since
    /// the last one and something was appended. The last one's time is read before the clock: a
    /// checkpoint another thread (an append making room) ends while this waits for its lock is
    /// later than a clock read before it, and the difference would overflow (a crash of foliod
    /// under a storm of writes near `--max-line`).
    public func wantsCheckpoint(interval: UInt64) -> Bool {
        let live = liveBytes
        if live > ring.size / 4 { return true }
        guard live > 0 else { return false }
        let last = checkpointing.locked { lastCheckpointTime }
        let now = monotonicNanoseconds()
        return now >= last && now - last >= interval
    }

    // MARK: Checkpoints

    /// Starts writing `data.mdb`'s pages back ahead of the next checkpoint.
    public func startWriteback() { environment.startWriteback() }

    /// Makes `data.mdb` durable up to its last commit and moves the journal's start past every
    /// record before it (see the type's steps). Safe from any thread; a failure leaves the last
    /// checkpoint in force (and must stop writes: `data.mdb` may not have been flushed).
    public func checkpoint() throws {
        try checkpointing.locked {
            let start = state.locked { next }
            let log = EventLog(database: events)
            let (pin, head) = try environment.pin { txn in try log.head(txn) }
            do {
                // Most of the pages written back before the flush, which the resume marker must
                // span, so that a crash of foliod rarely comes during one (`ResumeMarker`).
                environment.settleWriteback(atMost: Self.settledPages, timeout: Self.settleTimeout)
                try flushDataLocked()
                let checkpoint = CheckpointFile.Checkpoint(
                    generation: last.generation + 1, transaction: UInt64(pin.transaction), sequence: head.sequence,
                    hash: head.hash.bytes, journalStart: start, metaPage: pin.metaPage)
                try checkpoints.write(checkpoint, directory: directory)
                last = checkpoint
            } catch {
                pin.release()
                throw error
            }
            state.locked { tail = start }
            pinned?.release()
            pinned = pin
            lastCheckpointTime = monotonicNanoseconds()
            checkpointsTaken += 1
        }
    }

    /// Flushes `data.mdb` (`fdatasync`), with the resume marker `dirty` while it runs: every flush
    /// of `data.mdb` while journaling goes through here (`Store.flushData`), so that a failed one,
    /// whose failure the kernel reports only once, is never followed by a start that trusts the
    /// page cache (`ResumeMarker`).
    public func flushData() throws {
        try checkpointing.locked { try flushDataLocked() }
    }

    private func flushDataLocked() throws {
        try marker.clear()
        try environment.sync()
        marker.certify(environment.dataFileIdentity)
    }

    // MARK: Opening and recovery

    /// What `open` found and did.
    public struct Recovery: Sendable {
        /// The log's last sequence at the checkpoint, and after the journal was applied.
        public let checkpointSequence: UInt64
        public let sequence: UInt64
        public let records: Int
        /// Records skipped because a cancel followed them (their commit had failed).
        public let cancelled: Int
        /// The start resumed at LMDB's last commit, after a crash of foliod alone: nothing was
        /// restored or applied (`ResumeMarker`).
        public let resumed: Bool
    }

    /// Run by `Store.init` after the environment is open (and, if there was a checkpoint, its meta
    /// page restored and the environment pinned at once, unless `resuming`): applies the journal
    /// past the checkpoint (or, `resuming`, checks that LMDB's last commit follows it and applies
    /// nothing), then either keeps journaling (`enabled`, with a fresh checkpoint) or makes
    /// `data.mdb` durable and removes the journal's files.
    static func open(
        store: Store, checkpoint: CheckpointFile.Checkpoint?, pin: Environment.Pin?, resuming: Bool,
        marker: ResumeMarker, enabled: Bool,
        size: Int, directWrites: Bool
    ) throws -> (Journal?, Recovery?) {
        let directory = store.directory
        let journalPath = directory + "/" + journalName
        var recovery: Recovery?
        var end: UInt64 = 0
        if let checkpoint, resuming {
            // The last commit holds every answered write; it must continue the checkpoint's log.
            let log = EventLog(database: store.databases.events)
            let (head, hash) = try store.environment.read { txn in
                (
                    try log.head(txn),
                    try log.record(checkpoint.sequence, txn).map { Array(try EventLog.hash(of: $0).bytes) }
                )
            }
            guard head.sequence >= checkpoint.sequence, checkpoint.sequence == 0 || hash == checkpoint.hash else {
                throw StoreError.corrupted(
                    "data.mdb ends at event \(head.sequence) and does not continue the checkpoint's log at event \(checkpoint.sequence)"
                )
            }
            // Past every position the records after the checkpoint can have taken (the ring never
            // holds more than its size past the last durable checkpoint's start).
            let ring = try JournalRing.open(journalPath, size: size, directory: directory)
            end = checkpoint.journalStart + UInt64(ring.size)
            ring.close()
            recovery = Recovery(
                checkpointSequence: checkpoint.sequence, sequence: head.sequence, records: 0, cancelled: 0,
                resumed: true)
        } else if let checkpoint {
            let head = try store.environment.read { txn in try EventLog(database: store.databases.events).head(txn) }
            guard head.sequence == checkpoint.sequence, head.hash.bytes == checkpoint.hash else {
                throw StoreError.corrupted(
                    "the checkpoint names event \(checkpoint.sequence), but data.mdb restored to it ends at event \(head.sequence)"
                )
            }
            end = checkpoint.journalStart
            var records = 0
            var cancelled = 0
            var sequence = head.sequence
            if access(journalPath, F_OK) == 0 {
                let ring = try JournalRing.open(journalPath, size: size, directory: directory)
                defer { ring.close() }
                (end, records, cancelled, sequence) = try replay(
                    ring, from: checkpoint.journalStart, into: store, after: head)
            }
            recovery = Recovery(
                checkpointSequence: checkpoint.sequence, sequence: sequence, records: records, cancelled: cancelled,
                resumed: false)
        } else if access(journalPath, F_OK) == 0 {
            // Left by a journal being turned off: the checkpoint went first, so data.mdb is durable.
            unlink(journalPath)
        }
        guard enabled else {
            if checkpoint != nil {
                try store.environment.sync()
                unlink(directory + "/" + checkpointName)
                unlink(journalPath)
                try Environment.flushDirectory(directory)
            }
            marker.remove()
            pin?.release()
            return (nil, recovery)
        }
        let ring = try JournalRing.open(journalPath, size: size, directory: directory, direct: directWrites)
        // A fresh lap: no record left in the file, whole or torn, can pass for one written from here.
        let start = checkpoint == nil ? ring.nextLap(0) : ring.nextLap(end)
        let journal = Journal(
            environment: store.environment, events: store.databases.events, directory: directory, ring: ring,
            marker: marker, start: start,
            last: checkpoint
                ?? CheckpointFile.Checkpoint(
                    generation: 0, transaction: 0, sequence: 0, hash: [], journalStart: 0, metaPage: []))
        try journal.checkpoint()
        pin?.release()
        return (journal, recovery)
    }

    /// Applies the whole records from `start` on whose events follow `head`; returns the position
    /// after the last record read, how many were applied, how many were skipped for a cancel, and
    /// the log's last sequence.
    private static func replay(
        _ ring: JournalRing, from start: UInt64, into store: Store, after head: EventLog.Head
    ) throws -> (UInt64, Int, Int, UInt64) {
        var position = start
        var head = head
        var applied = 0
        var cancelled = 0
        /// The whole record at `position`, or at the start of the next lap (where a record that did
        /// not fit before the end went).
        func wholeRecord(at position: UInt64) throws -> JournalRing.Record? {
            if let record = try ring.record(at: position) { return record }
            guard position % UInt64(ring.size) != 0 else { return nil }
            return try ring.record(at: ring.nextLap(position))
        }
        while true {
            guard let record = try wholeRecord(at: position) else { break }
            if record.cancels {
                // Its record lay before the checkpoint's start, or was skipped below.
                guard record.firstSequence <= head.sequence + 1 else { break }
                position = record.end
                continue
            }
            let last = record.firstSequence + UInt64(record.events.count) - 1
            // Its transaction's commit failed: the writer wrote a cancel next, before anything else,
            // and reused the sequences. (Without a whole cancel it is applied: none of its writes
            // was answered, since their failure waited for the cancel's sync.) Looked for first: a
            // cancelled record placed after the checkpoint's start whose sequences a later commit
            // before the checkpoint's pin took again neither follows the head nor lies before it.
            if let next = try wholeRecord(at: record.end), next.cancels, next.firstSequence == record.firstSequence {
                position = next.end
                if last > head.sequence { cancelled += 1 }
                continue
            }
            if last <= head.sequence {
                position = record.end
                continue
            }
            // Whole, and following the log: every event's hash must chain from the head.
            guard record.firstSequence == head.sequence + 1 else { break }
            var chain = head.hash
            var events: [(Event, [UInt8])] = []
            var intact = true
            for (index, entry) in record.events.enumerated() {
                let next = chain.next(entry.canonical)
                guard next.bytes == entry.hash else {
                    intact = false
                    break
                }
                let stored = entry.hash + entry.canonical
                let event = try stored.withUnsafeBytes {
                    try EventLog.decode($0, sequence: record.firstSequence + UInt64(index))
                }
                events.append((event, entry.hash))
                chain = next
            }
            guard intact else { break }
            // The pin keeps the checkpoint's pages from being reused, so replay may need a larger map
            // than the one the records were first written in.
            try store.growingMap {
                try store.write { writer in
                    for (event, hash) in events {
                        let result = try writer.append(event, isolated: false)
                        guard result.chainHash.bytes == hash else {
                            throw StoreError.corrupted(
                                "journal event \(event.sequence) applies with another chain hash than it was written with"
                            )
                        }
                    }
                }
            }
            head = EventLog.Head(sequence: last, hash: chain)
            applied += 1
            position = record.end
        }
        return (position, applied, cancelled, head.sequence)
    }
}

/// A pthread mutex for short critical sections.
final class PThreadMutex: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    init() { pthread_mutex_init(mutex, nil) }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func locked<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}
