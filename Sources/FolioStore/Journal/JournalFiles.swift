import CFolioSystem
import Glibc
import LMDB
import Synchronization

/// The two files of the journal (docs/DURABILITY.md), each written in place so that a sync of it
/// is one data flush, never a file-system metadata write.
///
/// `journal`: a ring of records, one per write transaction, each its events as the log stores them,
/// written before the transaction commits; a **cancel** (a header alone, naming the first
/// sequence of the record before it) follows a record whose commit then failed. Positions are
/// virtual (they only grow); a record lies at `virtual % size`, or at the start of the next lap
/// when it would run past the end. Its header names its own virtual position, so a stale record
/// of an earlier lap, or a torn one, never passes for the next.
///
///     record: magic u32 | payload bytes u32 | virtual position u64 | first sequence u64
///             | events u32 | kind u32 | events: (bytes u32 | chain hash 32 | canonical event)…
///
/// `kind` is 0 for events (at least one) and 1 for a cancel (no events, no payload).
struct JournalRing {
    static let headerSize = 32
    static let magic: UInt32 = 0x4A52_4F46  // "FORJ"

    let path: String
    let file: Int32
    let size: Int
    /// Writes the records around the page cache, when the file system allows it (`DirectWrites`).
    let direct: DirectWrites?

    /// Opens the ring at `path`, creating it (`size` bytes of zeros, rounded up to a multiple of
    /// 4 KiB so that its records can be written directly, flushed, its directory too) if it does
    /// not exist. With `direct`, records are written with `O_DIRECT` where the file system allows
    /// it (`DirectWrites`); a ring only read back (recovery) has no need of it.
    static func open(_ path: String, size: Int, directory: String, direct: Bool = false) throws -> JournalRing {
        let size = DirectWrites.blockEnd(size)
        var file = Glibc.open(path, O_RDWR | O_CLOEXEC)
        if file < 0 && errno == ENOENT {
            let draft = path + ".new"
            let fresh = Glibc.open(draft, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard fresh >= 0 else { throw StoreError.io("create \(draft)", errno) }
            do {
                let zeros = [UInt8](repeating: 0, count: 1 << 20)
                var offset = 0
                while offset < size {
                    let count = min(zeros.count, size - offset)
                    try zeros.withUnsafeBytes {
                        try writeFully(fresh, UnsafeRawBufferPointer(rebasing: $0[..<count]), at: offset, path: draft)
                    }
                    offset += count
                }
                try syncFile(fresh, path: draft)
                Glibc.close(fresh)
                guard rename(draft, path) == 0 else { throw StoreError.io("rename \(draft)", errno) }
                try Environment.flushDirectory(directory)
            } catch {
                Glibc.close(fresh)
                unlink(draft)
                throw error
            }
            file = Glibc.open(path, O_RDWR | O_CLOEXEC)
        }
        guard file >= 0 else { throw StoreError.io("open \(path)", errno) }
        var status = stat()
        guard fstat(file, &status) == 0 else {
            Glibc.close(file)
            throw StoreError.io("stat \(path)", errno)
        }
        // A ring is made whole before it is named; a shorter one was cut by someone else.
        guard status.st_size >= 1 << 16 else {
            Glibc.close(file)
            throw StoreError.corrupted("\(path) is \(status.st_size) bytes, less than any journal foliod makes")
        }
        return JournalRing(
            path: path, file: file, size: Int(status.st_size),
            direct: direct ? DirectWrites.open(path, size: Int(status.st_size), reading: file) : nil)
    }

    func close() {
        Glibc.close(file)
        direct?.close()
    }

    /// The virtual position up to which a record ending at `end` writes: the end of its last block
    /// when records are written directly (the rest of that block is overwritten with zeros).
    func writtenEnd(_ end: UInt64) -> UInt64 {
        direct == nil ? end : UInt64(DirectWrites.blockEnd(Int(end)))
    }

    /// Where a record of `length` bytes goes if the next free virtual position is `virtual`.
    func placement(of length: Int, at virtual: UInt64) -> UInt64 {
        let offset = Int(virtual % UInt64(size))
        return offset + length <= size ? virtual : nextLap(virtual)
    }

    func nextLap(_ virtual: UInt64) -> UInt64 { (virtual / UInt64(size) + 1) * UInt64(size) }

    func write(_ bytes: UnsafeRawBufferPointer, at virtual: UInt64) throws {
        let offset = Int(virtual % UInt64(size))
        if let direct, try direct.write(bytes, at: offset) { return }
        try writeFully(file, bytes, at: offset, path: path)
    }

    func sync() throws { try syncFile(file, path: path) }

    /// Reads the record at `virtual`, or nil if what lies there is not a whole record written for
    /// that position: the header's magic and position, and the events' lengths, must agree.
    func record(at virtual: UInt64) throws -> Record? {
        let offset = Int(virtual % UInt64(size))
        guard offset + Self.headerSize <= size else { return nil }
        let header = try read(Self.headerSize, at: offset)
        let (magic, length, position, first, count, kind) = header.withUnsafeBytes { bytes in
            (
                UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 0, as: UInt32.self)),
                Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self))),
                UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self)),
                UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 16, as: UInt64.self)),
                Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 24, as: UInt32.self))),
                UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 28, as: UInt32.self))
            )
        }
        guard magic == Self.magic, position == virtual, first > 0 else { return nil }
        if kind == Self.cancelKind {
            guard length == 0, count == 0 else { return nil }
            return Record(firstSequence: first, events: [], cancels: true, end: virtual + UInt64(Self.headerSize))
        }
        guard kind == 0, offset + Self.headerSize + length <= size, count > 0 else { return nil }
        let payload = try read(length, at: offset + Self.headerSize)
        var events: [(hash: [UInt8], canonical: [UInt8])] = []
        var cursor = 0
        for _ in 0..<count {
            guard cursor + 4 + ChainHash.size <= payload.count else { return nil }
            let bytes = payload.withUnsafeBytes {
                Int(UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: cursor, as: UInt32.self)))
            }
            guard bytes > ChainHash.size, cursor + 4 + bytes <= payload.count else { return nil }
            let hash = Array(payload[(cursor + 4)..<(cursor + 4 + ChainHash.size)])
            events.append((hash, Array(payload[(cursor + 4 + ChainHash.size)..<(cursor + 4 + bytes)])))
            cursor += 4 + bytes
        }
        guard cursor == payload.count else { return nil }
        return Record(
            firstSequence: first, events: events, cancels: false, end: virtual + UInt64(Self.headerSize + length))
    }

    /// A whole record as read back.
    struct Record {
        let firstSequence: UInt64
        /// Each event's chain hash and canonical bytes; none for a cancel.
        let events: [(hash: [UInt8], canonical: [UInt8])]
        /// A cancel: the record before it, which starts at `firstSequence`, never committed.
        let cancels: Bool
        /// The virtual position after it.
        let end: UInt64
    }

    static let cancelKind: UInt32 = 1

    /// Appends a cancel of the record that starts at `first` to `buffer`, for the virtual position
    /// `virtual`: that record's transaction did not commit.
    static func encodeCancel(of first: UInt64, at virtual: UInt64, into buffer: inout [UInt8]) {
        buffer.appendLittleEndian(magic)
        buffer.appendLittleEndian(UInt32(0))
        buffer.appendLittleEndian(virtual)
        buffer.appendLittleEndian(first)
        buffer.appendLittleEndian(UInt32(0))
        buffer.appendLittleEndian(cancelKind)
    }

    private func read(_ count: Int, at offset: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let result = bytes.withUnsafeMutableBytes {
                pread(file, $0.baseAddress! + done, count - done, off_t(offset + done))
            }
            if result < 0 {
                if errno == EINTR { continue }
                throw StoreError.io("read \(path)", errno)
            }
            if result == 0 { throw StoreError.io("read \(path): ends at \(offset + done)", EIO) }
            done += result
        }
        return bytes
    }

    /// Appends a record of `events` (sequence, chain hash, canonical bytes) to `buffer`, for the
    /// virtual position `virtual`.
    static func encode(
        _ events: some Collection<(sequence: UInt64, hash: [UInt8], canonical: [UInt8])>, at virtual: UInt64,
        into buffer: inout [UInt8]
    ) {
        let start = buffer.count
        let length = events.reduce(0) { $0 + 4 + ChainHash.size + $1.canonical.count }
        buffer.appendLittleEndian(magic)
        buffer.appendLittleEndian(UInt32(length))
        buffer.appendLittleEndian(virtual)
        buffer.appendLittleEndian(events.first?.sequence ?? 0)
        buffer.appendLittleEndian(UInt32(events.count))
        buffer.appendLittleEndian(UInt32(0))
        for event in events {
            buffer.appendLittleEndian(UInt32(ChainHash.size + event.canonical.count))
            buffer.append(contentsOf: event.hash)
            buffer.append(contentsOf: event.canonical)
        }
        assert(buffer.count - start == headerSize + length)
    }
}

/// The journal's records written with `O_DIRECT`: a record goes from memory to the disk's queue
/// without a copy into the page cache, and the sync after it has no dirty page to look for and
/// write back, only the disk's cache to flush (which a sync must flush either way). `O_DIRECT`
/// writes whole aligned blocks, so a run of records is written as the blocks it touches: the
/// block's bytes before the run as the last write left them (kept in memory: records are
/// appended in order, and after a start the first goes at a lap's start, a block's start), the
/// run, and zeros to the end of its last block. Those zeros overwrite only space no live record
/// holds: `Journal.append` counts a record's room to the end of its last block (`writtenEnd`), and
/// a header of zeros is no record, as a stale one of an earlier lap is none.
///
/// Used when the ring's size is a multiple of the block and the file system takes `O_DIRECT`
/// (tmpfs does not); a first write it refuses (`EINVAL`: a device whose blocks are larger) turns it
/// off for good, and the ring writes through the page cache as before. Durability is the same
/// either way: nothing counts as written before `JournalRing.sync`'s `fdatasync`.
final class DirectWrites: @unchecked Sendable {
    static let block = 4096

    /// `position` rounded up to the next block boundary.
    static func blockEnd(_ position: Int) -> Int { (position + block - 1) / block * block }

    private let file: Int32
    /// The ring's own descriptor, for the rare block read back (coherent with direct writes).
    private let reading: Int32
    private let size: Int
    /// A block-aligned buffer the writes are composed in: a few blocks, more for a large run (and
    /// back to a few after it).
    private var staging: UnsafeMutableRawPointer
    private var capacity: Int
    private static let keptCapacity = 16 * block
    /// The block where the last write ended, when it ended inside it: its offset (`lastBlock`)
    /// and its bytes.
    private var lastBlock: Int?
    private let lastBlockBytes: UnsafeMutableRawPointer
    private let refusedFlag = Atomic<Bool>(false)
    private var refused: Bool {
        get { refusedFlag.load(ordering: .relaxed) }
        set { refusedFlag.store(newValue, ordering: .relaxed) }
    }
    private var wrote = false
    /// Whether writes still go around the page cache (read by `stats` from other threads).
    var isOn: Bool { !refused }

    static func open(_ path: String, size: Int, reading: Int32) -> DirectWrites? {
        // FOLIO_JOURNAL_DIRECT=0 writes through the page cache (tests, and measuring the two ways).
        guard size % block == 0, getenv("FOLIO_JOURNAL_DIRECT").map({ String(cString: $0) }) != "0" else { return nil }
        let file = folio_open_direct_write(path)
        guard file >= 0 else { return nil }
        return DirectWrites(file: file, reading: reading, size: size)
    }

    private init(file: Int32, reading: Int32, size: Int) {
        self.file = file
        self.reading = reading
        self.size = size
        capacity = Self.keptCapacity
        staging = Self.allocate(capacity)
        lastBlockBytes = Self.allocate(Self.block)
    }

    deinit {
        staging.deallocate()
        lastBlockBytes.deallocate()
    }

    private static func allocate(_ bytes: Int) -> UnsafeMutableRawPointer {
        UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: block)
    }

    func close() { Glibc.close(file) }

    /// Writes `bytes` at `offset` of the ring; false if direct writes are off (the caller writes
    /// through the page cache).
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws -> Bool {
        guard !refused else { return false }
        let start = offset / Self.block * Self.block
        let end = offset + bytes.count
        let writtenEnd = Self.blockEnd(end)
        precondition(writtenEnd <= size, "a journal record past the ring's end")
        let total = writtenEnd - start
        if total > capacity || (capacity > Self.keptCapacity && total <= Self.keptCapacity) {
            staging.deallocate()
            capacity = max(total, Self.keptCapacity)
            staging = Self.allocate(capacity)
        }
        if offset > start {
            if lastBlock == start {
                staging.copyMemory(from: lastBlockBytes, byteCount: offset - start)
            } else {
                try read(block: start)
            }
        }
        if !bytes.isEmpty { (staging + (offset - start)).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
        (staging + (end - start)).initializeMemory(as: UInt8.self, repeating: 0, count: writtenEnd - end)
        var written = 0
        while written < total {
            let result = pwrite(file, staging + written, total - written, off_t(start + written))
            if result < 0 {
                if errno == EINTR { continue }
                if errno == EINVAL && !wrote {
                    refused = true
                    return false
                }
                throw StoreError.io("write journal (O_DIRECT)", errno)
            }
            written += result
        }
        wrote = true
        if end < writtenEnd {
            lastBlock = writtenEnd - Self.block
            lastBlockBytes.copyMemory(from: staging + (total - Self.block), byteCount: Self.block)
        } else {
            lastBlock = nil
        }
        return true
    }

    /// Reads the block at `offset` into the start of `staging`.
    private func read(block offset: Int) throws {
        var done = 0
        while done < Self.block {
            let result = pread(reading, staging + done, Self.block - done, off_t(offset + done))
            if result < 0 {
                if errno == EINTR { continue }
                throw StoreError.io("read journal (O_DIRECT)", errno)
            }
            if result == 0 { throw StoreError.io("read journal: ends at \(offset + done)", EIO) }
            done += result
        }
    }
}

/// `checkpoint`: the last state of `data.mdb` known to be on disk, in two slots written in turn
/// (each with its SHA-256, so a torn write leaves the other): LMDB's meta page of that state, its
/// transaction, the log's head in it, and the journal position from which records may follow it.
/// Its descriptor is opened by the first write, which `Journal.open` makes at start-up, and kept:
/// a checkpoint needs no new descriptor, so one due while the process has none left (every client
/// slot taken) still goes through instead of failing and stopping writes.
final class CheckpointFile: @unchecked Sendable {
    static let slotSize = 8192
    static let magic: UInt32 = 0x4B43_4F46  // "FOCK"

    struct Checkpoint: Equatable {
        var generation: UInt64
        var transaction: UInt64
        var sequence: UInt64
        var hash: [UInt8]
        /// Virtual journal position where the records after `sequence` begin (or earlier).
        var journalStart: UInt64
        var metaPage: [UInt8]
    }

    let path: String
    /// Open from the first `write` on; written under the journal's checkpoint lock only.
    private var file: Int32 = -1

    init(path: String) { self.path = path }

    deinit { if file >= 0 { close(file) } }

    static func read(_ path: String) throws -> Checkpoint? {
        let file = open(path, O_RDONLY | O_CLOEXEC)
        guard file >= 0 else {
            if errno == ENOENT { return nil }
            throw StoreError.io("open \(path)", errno)
        }
        defer { close(file) }
        var best: Checkpoint?
        for slot in 0..<2 {
            var bytes = [UInt8](repeating: 0, count: slotSize)
            let count = bytes.withUnsafeMutableBytes { pread(file, $0.baseAddress!, slotSize, off_t(slot * slotSize)) }
            guard count == slotSize, let checkpoint = decode(bytes) else { continue }
            if best == nil || checkpoint.generation > best!.generation { best = checkpoint }
        }
        return best
    }

    private static func decode(_ bytes: [UInt8]) -> Checkpoint? {
        let fixed = 4 + 4 + 8 * 3 + ChainHash.size + 8 + 4
        return bytes.withUnsafeBytes { raw -> Checkpoint? in
            guard UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt32.self)) == magic else {
                return nil
            }
            let metaLength = Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: fixed - 4, as: UInt32.self)))
            let end = fixed + metaLength
            guard metaLength > 0, end + ChainHash.size <= slotSize else { return nil }
            let hasher = SHA256Hasher()
            hasher.update(UnsafeRawBufferPointer(rebasing: raw[..<end]))
            guard hasher.finalize().elementsEqual(raw[end..<(end + ChainHash.size)]) else { return nil }
            func u64(_ at: Int) -> UInt64 {
                UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: at, as: UInt64.self))
            }
            return Checkpoint(
                generation: u64(8), transaction: u64(16), sequence: u64(24),
                hash: Array(raw[32..<(32 + ChainHash.size)]),
                journalStart: u64(32 + ChainHash.size), metaPage: Array(raw[fixed..<end]))
        }
    }

    /// Writes `checkpoint` into its slot (by generation) and flushes the file; creates the file,
    /// and flushes its directory, the first time.
    func write(_ checkpoint: Checkpoint, directory: String) throws {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.slotSize)
        bytes.appendLittleEndian(Self.magic)
        bytes.appendLittleEndian(UInt32(1))
        bytes.appendLittleEndian(checkpoint.generation)
        bytes.appendLittleEndian(checkpoint.transaction)
        bytes.appendLittleEndian(checkpoint.sequence)
        bytes.append(contentsOf: checkpoint.hash)
        bytes.appendLittleEndian(checkpoint.journalStart)
        bytes.appendLittleEndian(UInt32(checkpoint.metaPage.count))
        bytes.append(contentsOf: checkpoint.metaPage)
        let hasher = SHA256Hasher()
        hasher.update(bytes)
        bytes.append(contentsOf: hasher.finalize())
        precondition(
            bytes.count <= Self.slotSize,
            "a meta page of \(checkpoint.metaPage.count) bytes does not fit a checkpoint slot")
        bytes.append(contentsOf: repeatElement(0, count: Self.slotSize - bytes.count))
        var created = false
        if file < 0 {
            created = access(path, F_OK) != 0
            let opened = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard opened >= 0 else { throw StoreError.io("open \(path)", errno) }
            file = opened
            if created {
                // Both slots exist from the start, so that a later write never extends the file.
                let empty = [UInt8](repeating: 0, count: 2 * Self.slotSize)
                try empty.withUnsafeBytes { try writeFully(opened, $0, at: 0, path: path) }
            }
        }
        let file = self.file
        try bytes.withUnsafeBytes {
            try writeFully(file, $0, at: Int(checkpoint.generation & 1) * Self.slotSize, path: path)
        }
        try syncFile(file, path: path)
        if created { try Environment.flushDirectory(directory) }
    }
}

func writeFully(_ file: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int, path: String) throws {
    var written = 0
    while written < bytes.count {
        let result = pwrite(file, bytes.baseAddress! + written, bytes.count - written, off_t(offset + written))
        if result < 0 {
            if errno == EINTR { continue }
            throw StoreError.io("write \(path)", errno)
        }
        written += result
    }
}

func syncFile(_ file: Int32, path: String) throws {
    while fdatasync(file) != 0 {
        if errno != EINTR { throw StoreError.io("fdatasync \(path)", errno) }
    }
}
