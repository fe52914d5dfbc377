import LMDB

/// The named databases of a Folio environment, and how their keys are built.
///
/// | database  | key                                  | value                                        |
/// |-----------|--------------------------------------|----------------------------------------------|
/// | `meta`    | `format`, `nextTree`                 | u32                                          |
/// | `events`  | sequence, u64 big-endian             | chain hash (32 bytes) + canonical event JSON |
/// | `objects` | collection 0 id                      | version, createdAt, updatedAt, data JSON     |
/// | `objects` | collection 0 id 0 sequence           | history: version after that event, or a checkpoint |
/// | `catalog` | `c` collection / `v` view / `w` collection 0 view | tree id (+ view definition)     |
/// | `trees`   | tree id + node id                    | counted tree nodes (views, creation order, references) |
/// | `viewops` | op number, u64 big-endian / `0`      | views' changes not yet merged into their trees / where they stand (`ViewBuffer`) |
/// | `requests` | `k` key / `t` time key              | request keys of recent writes (`RequestIndex`) |
/// | `files`   | `n` name / `b` sha256 / `t`          | the file index (`FileIndex`)                 |
struct StoreDatabases: Sendable {
    /// 2: history entries hold checkpoints (`HistoryIndex`). 3: the file totals count orphans
    /// (`FileIndex`). 4: a tree's branch stores its last child's count as 0 (`CountedTree`). 5: a
    /// view's tree takes its changes as ops, merged into it many at a time (`ViewBuffer`): a foliod
    /// of format 4 would not see them. 6: the ops are merged in rounds, a tree at a time, and the
    /// stream's state may hold a round (`BufferState`), which a foliod of format 5 would not see.
    /// 7: a round takes a big tree's ops in chunks, and says how far it is (`MergeRound`), which a
    /// foliod of format 6 would not read. 8: the stream's state is in LMDB's main database, where a
    /// foliod of format 7 would not find it. A store of format 5, 6 or 7 is of format 8 once its
    /// stream's state has moved (a round of format 6 takes every tree's ops whole); one of an
    /// earlier format is upgraded by deriving its state again from the log.
    static let formatVersion: UInt32 = 8

    let meta: Database
    let events: Database
    /// Current state, and each object's history right after it: keys of one object sort together,
    /// so a write dirties one leaf page for both (random ids would otherwise dirty two per write).
    let objects: Database
    let catalog: Database
    let trees: Database
    let requests: Database
    let files: Database
    /// Views' changes not yet merged into their trees, and where they stand (`ViewBuffer`).
    let viewOps: ViewStreamDatabases
    /// Resolutions of buffered view trees, shared by the store's read snapshots (`ViewBuffer`).
    let deltas = ViewDeltaCache()

    init(_ environment: Environment) throws {
        meta = try environment.openDatabase("meta")
        events = try environment.openDatabase("events")
        objects = try environment.openDatabase("objects")
        catalog = try environment.openDatabase("catalog")
        trees = try environment.openDatabase("trees")
        requests = try environment.openDatabase("requests")
        files = try environment.openDatabase("files")
        viewOps = ViewStreamDatabases(
            ops: try environment.openDatabase("viewops"), main: try environment.mainDatabase())
    }

    /// Every database whose content is derived from the log (all but `meta` and `events`).
    /// (The view op stream's state, in the main database, is derived too: see `ViewBuffer`.)
    var derived: [Database] { [objects, catalog, trees, requests, files, viewOps.ops] }
}

/// Where a view op stream lives: its ops in `viewops`, its state (`BufferState`) under
/// `ViewBuffer.stateKey` in LMDB's main database, whose page every commit rewrites anyway: in the
/// ops' database it cost a commit with view changes a leaf page of its own.
struct ViewStreamDatabases: Sendable {
    let ops: Database
    let main: Database
}

enum Keys {
    static func sequence(_ sequence: UInt64) -> [UInt8] {
        withUnsafeBytes(of: sequence.bigEndian) { Array($0) }
    }

    static func sequence(from key: UnsafeRawBufferPointer) -> UInt64 {
        UInt64(bigEndian: key.loadUnaligned(as: UInt64.self))
    }

    /// `collection 0 id`
    static func object(_ collection: String, _ id: String) -> [UInt8] {
        let count = collection.utf8.count + 1 + id.utf8.count
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            initialized = writeObjectKey(collection, id, into: UnsafeMutableRawBufferPointer(buffer))
        }
    }

    /// `body` with `object(collection, id)` in a buffer on the stack: no allocation (a get).
    static func withObjectKey<R>(_ collection: String, _ id: String, _ body: (UnsafeRawBufferPointer) throws -> R)
        rethrows -> R
    {
        try withUnsafeTemporaryAllocation(byteCount: collection.utf8.count + 1 + id.utf8.count, alignment: 1) {
            buffer in
            let count = writeObjectKey(collection, id, into: buffer)
            return try body(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        }
    }

    /// `withObjectKey` for names given as bytes.
    static func withObjectKey<R>(
        _ collection: UnsafeRawBufferPointer, _ id: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        try withUnsafeTemporaryAllocation(byteCount: collection.count + 1 + id.count, alignment: 1) { buffer in
            buffer.copyMemory(from: collection)
            buffer[collection.count] = 0
            UnsafeMutableRawBufferPointer(rebasing: buffer[(collection.count + 1)...]).copyMemory(from: id)
            return try body(UnsafeRawBufferPointer(buffer))
        }
    }

    private static func writeObjectKey(_ collection: String, _ id: String, into buffer: UnsafeMutableRawBufferPointer)
        -> Int
    {
        var collection = collection
        var id = id
        let count = collection.withUTF8 { utf8 in
            buffer.copyMemory(from: UnsafeRawBufferPointer(utf8))
            return utf8.count
        }
        buffer[count] = 0
        return id.withUTF8 { utf8 in
            UnsafeMutableRawBufferPointer(rebasing: buffer[(count + 1)...]).copyMemory(
                from: UnsafeRawBufferPointer(utf8))
            return count + 1 + utf8.count
        }
    }

    /// `collection 0`: the prefix of every object key of a collection.
    static func collectionPrefix(_ collection: String) -> [UInt8] {
        Array(collection.utf8) + [0]
    }

    /// Whether a key of the objects database is a history entry rather than an object.
    static func isHistory(_ key: some Collection<UInt8>) -> Bool {
        key.lazy.filter { $0 == 0 }.count >= 2
    }

    /// The first key after every history entry of the object that `key` (its object key, or one of
    /// its history entries) belongs to: `collection 0 id 1`.
    static func pastHistory(of key: UnsafeRawBufferPointer) -> [UInt8] {
        var end = key.count
        var zeros = 0
        for index in key.indices where key[index] == 0 {
            zeros += 1
            if zeros == 2 {
                end = index
                break
            }
        }
        return Array(key[..<end]) + [1]
    }

    /// `collection 0 id 0`: the prefix of an object's history entries.
    static func historyPrefix(_ collection: String, _ id: String) -> [UInt8] {
        object(collection, id) + [0]
    }

    /// `body` with `collection 0 id 0 sequence` (big-endian), an object's history entry, in a buffer
    /// on the stack: no allocation (every event of an object records one).
    static func withHistoryKey<R>(
        _ collection: String, _ id: String, _ sequence: UInt64, _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows
        -> R
    {
        try withUnsafeTemporaryAllocation(byteCount: collection.utf8.count + 1 + id.utf8.count + 9, alignment: 1) {
            buffer in
            let count = writeObjectKey(collection, id, into: buffer)
            buffer[count] = 0
            buffer.storeBytes(of: sequence.bigEndian, toByteOffset: count + 1, as: UInt64.self)
            return try body(UnsafeRawBufferPointer(rebasing: buffer[..<(count + 9)]))
        }
    }
}

extension UnsafeRawBufferPointer {
    /// Bounds-checked in every build (`loadUnaligned` checks only in debug builds): these bytes
    /// come from LMDB, and a damaged record must stop here rather than be read past its end.
    /// Callers check a record's size first and throw `corrupted`; this is the net under them.
    @inline(__always)
    func loadLittleEndian<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        precondition(offset >= 0 && offset <= count &- MemoryLayout<T>.size)
        return T(littleEndian: loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    /// The integer a record of LMDB's starts with (a tree id, a count, a version), or `corrupted`,
    /// naming `what`, if the record is too short to hold one.
    func leadingLittleEndian<T: FixedWidthInteger>(_: T.Type, of what: @autoclosure () -> String) throws -> T {
        guard count >= MemoryLayout<T>.size else { throw StoreError.corrupted("\(what()) of \(count) bytes") }
        return loadLittleEndian(T.self, at: 0)
    }
}
