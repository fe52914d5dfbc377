import Foundation
import LMDB
import Synchronization

/// The changes of views' trees not yet merged into them: a view's inserts and removals are
/// appended as op records to one stream shared by every view, and merged into the trees many at a
/// time, so that a commit writes the page at the stream's end instead of a leaf and its branches for
/// every insert (docs/BENCHMARKS.md, "Buffered view inserts").
///
/// The stream is the `viewops` database. A record holds consecutive ops, in order: key = its first
/// op's number (u64 big-endian, appended), value = per op: the view key's length (u16
/// little-endian), tree id (u32 little-endian), kind (1 insert, 0 remove), the view key; the next
/// op's number is one more (store format 8; before, a record per op, without the length:
/// `convertFormerOps`). A write keeps its ops in its cache until the event that made them is applied
/// (`EventApplier.apply`) or the stream is read (a merge turn, at the same ops whatever the
/// commits), so that a create into five views puts one record, not five, and the records are the
/// same in a replay of the log, whose commits group the events otherwise. The
/// `BufferState` is in LMDB's main database under `stateKey` (before store format 8, under key `0`
/// of `viewops`, `formerStateKey`), where it costs a commit no page of its own.
///
/// Once `limit` ops are pending, a merge round starts: the trees with ops take the ops before the
/// round's `end`, one tree per turn, a turn every `turnGap` ops, so that no commit merges more than
/// one tree (the writes queued behind a merge wait for it). A big tree (`bigTree` keys), whose
/// changes go in a leaf at a time and cost what they number, takes at most `chunk` ops a turn, so
/// that a turn's stall does not grow with the share of the ops one view takes. When the last tree has
/// taken its ops, the database is emptied at once and the ops after `end` put back. A tree's
/// pending ops are those from `BufferState.since(of:)` on: its nodes hold every op of its before
/// that, and change only when that moves, so a resolution of a tree's ops from one `since` stays
/// right for every snapshot with the same `since` and at least those ops.
enum ViewBuffer {
    /// The state's key in the main database: its 0 byte keeps it apart from the named databases'
    /// names (C strings), and `mdb_stat -a` and `mdb_dump -a` skip it.
    static let stateKey: [UInt8] = Array("\0folio.viewops.state".utf8)

    /// Where stores of formats 5 to 7 keep the state: key `0` of `viewops`.
    static let formerStateKey: [UInt8] = [0]

    /// Ops held before every tree merges them. `FOLIO_VIEW_BUFFER` overrides it (tests use a few
    /// ops to merge all the time); a store's layout depends on it, its content does not.
    static let limit: Int = {
        if let text = ProcessInfo.processInfo.environment["FOLIO_VIEW_BUFFER"], let value = Int(text), value >= 1 {
            return min(value, 1 << 20)
        }
        return 65536
    }()

    /// A test's own limit, for the writes it makes in its task.
    @TaskLocal static var limitOverride: Int?

    static var currentLimit: Int { limitOverride ?? limit }

    /// Ops between two turns of a round of `trees` trees: a round takes at most `4 + trees` turns
    /// (a big tree's ops in chunks of a quarter of the limit, one more for each tree's remainder),
    /// so it ends within an eighth of the limit after it starts, and the ops after its end stay few.
    static func turnGap(trees: Int) -> UInt64 { UInt64(max(1, currentLimit / (8 * (4 + max(1, trees))))) }

    /// A tree of at least this many keys takes its ops in chunks: four times the limit (262,144
    /// keys by default, about 7,500 leaves), where a round's changes to a view no longer outnumber
    /// its leaves, go in a leaf at a time (`CountedTree.takeChanges`), and cost what they number.
    static var bigTree: UInt64 { UInt64(currentLimit) * 4 }

    /// The most ops of a big tree a turn takes: a quarter of the limit (16,384 by default). Views
    /// that share a round's ops evenly take theirs in one turn each (13,107 each with five views);
    /// one that takes most of them, in up to four (its turn would otherwise cost four times as much).
    static var chunk: Int { max(1, currentLimit / 4) }

    static func opKey(_ number: UInt64) -> [UInt8] { withUnsafeBytes(of: number.bigEndian) { Array($0) } }

    /// An op's tree, kind and key, from its bytes as `forEachRecord` hands them.
    static func op(_ record: UnsafeRawBufferPointer) throws -> (tree: UInt32, insert: Bool, key: [UInt8]) {
        guard record.count >= 5 else { throw StoreError.corrupted("a view op of \(record.count) bytes") }
        return (record.loadUnaligned(as: UInt32.self).littleEndian, record[4] == 1, opKey(record))
    }

    /// The key of an op's bytes from the tree on, copied whole (an array made from a slice of
    /// the bytes would take them one at a time).
    private static func opKey(_ record: UnsafeRawBufferPointer) -> [UInt8] {
        Array(UnsafeRawBufferPointer(rebasing: record[5...]))
    }

    private static func database(_ txn: StoreTransaction) -> Database { databases(txn).ops }

    private static func databases(_ txn: StoreTransaction) -> ViewStreamDatabases {
        guard let databases = txn.viewOps else {
            preconditionFailure("a buffered tree in a transaction without the view ops' database")
        }
        return databases
    }

    /// The stream's state: in a write, read from LMDB once and kept in its cache.
    static func state(_ txn: StoreTransaction) throws -> BufferState {
        if let known = txn.cache?.knownBufferState() { return known }
        if let memo = txn.readMemo {
            return try memo.bufferState {
                try txn.lmdb.get(databases(txn).main, stateKey).map { try BufferState($0) } ?? BufferState()
            }
        }
        let state = try txn.lmdb.get(databases(txn).main, stateKey).map { try BufferState($0) } ?? BufferState()
        txn.cache?.setBufferState(state, changed: false)
        return state
    }

    /// In a write, the state goes into its cache, and into LMDB when the write ends
    /// (`StoreTransaction.flushTrees`); in a transaction without a cache, into LMDB.
    static func store(_ state: BufferState, _ txn: StoreTransaction) throws {
        if let cache = txn.cache { return cache.setBufferState(state, changed: true) }
        try txn.lmdb.put(databases(txn).main, stateKey, state.bytes)
    }

    /// Appends op `number`: in a write, to the ops its cache holds for one record (`flushOps`
    /// puts it); in a transaction without a cache, as a record of its own.
    static func append(_ number: UInt64, tree: UInt32, insert: Bool, key: [UInt8], _ txn: StoreTransaction) throws {
        if let cache = txn.cache {
            if cache.appendOp(number, tree: tree, insert: insert, key: key) { return }
            // Not the op after the ones held (a write appends in order): they go first.
            try flushOps(txn)
            precondition(cache.appendOp(number, tree: tree, insert: insert, key: key))
            return
        }
        var bytes: [UInt8] = []
        appendOp(tree: tree, insert: insert, key: key, to: &bytes)
        try txn.lmdb.put(database(txn), opKey(number), bytes, flags: .append)
    }

    /// An op as a record holds it: key length, tree, kind, key.
    static func appendOp(tree: UInt32, insert: Bool, key: [UInt8], to bytes: inout [UInt8]) {
        // Key length (2 bytes), tree (4) and kind (1), little-endian, a byte at a time: cheaper
        // than appending the bytes of an integer, which goes through a generic copy.
        let length = UInt16(key.count)
        bytes.append(UInt8(truncatingIfNeeded: length))
        bytes.append(UInt8(truncatingIfNeeded: length >> 8))
        bytes.append(UInt8(truncatingIfNeeded: tree))
        bytes.append(UInt8(truncatingIfNeeded: tree >> 8))
        bytes.append(UInt8(truncatingIfNeeded: tree >> 16))
        bytes.append(UInt8(truncatingIfNeeded: tree >> 24))
        bytes.append(insert ? 1 : 0)
        bytes.append(contentsOf: key)
    }

    /// Puts the ops the write's cache holds (at this level) into LMDB as one record. Before the
    /// stream is read, before a nested write begins (LMDB takes no puts into a transaction with a
    /// child) and ends, and when the write ends.
    static func flushOps(_ txn: StoreTransaction) throws {
        guard let (first, bytes) = txn.cache?.takeOps() else { return }
        try txn.lmdb.put(database(txn), opKey(first), bytes, flags: .append)
    }

    /// Stores of formats 5 to 7 hold a record per op, without the key's length: each becomes a
    /// record of format 8 (of one op). Runs once, when such a store is opened.
    static func convertFormerOps(_ lmdb: Transaction, _ ops: Database) throws -> Int {
        var records: [([UInt8], [UInt8])] = []
        try lmdb.withCursor(ops) { cursor in
            var entry = try cursor.first()
            while let (key, value) = entry {
                if key.count == 8 {
                    guard value.count >= 5 else { throw StoreError.corrupted("a view op of \(value.count) bytes") }
                    var bytes: [UInt8] = []
                    appendOp(
                        tree: value.loadUnaligned(as: UInt32.self).littleEndian, insert: value[4] == 1,
                        key: Array(value[5...]), to: &bytes)
                    records.append((Array(key), bytes))
                }
                entry = try cursor.next()
            }
        }
        try lmdb.empty(ops)
        for (key, bytes) in records { try lmdb.put(ops, key, bytes, flags: .append) }
        return records.count
    }

    /// Changes the stream's state in place: in a write, the one its cache holds (copied there
    /// first from a parent write's or LMDB), so that changing it copies none of its arrays.
    /// `body` must not read the state through `txn` (it is being changed).
    static func update<R>(_ txn: StoreTransaction, _ body: (inout BufferState) throws -> R) throws -> R {
        guard let cache = txn.cache else {
            var state = try state(txn)
            let result = try body(&state)
            try store(state, txn)
            return result
        }
        if !cache.holdsOwnBufferState { cache.setBufferState(try state(txn), changed: true) }
        return try cache.changeOwnBufferState(body)
    }

    /// Drops every op, those the write's cache holds too.
    static func removeOps(_ txn: StoreTransaction) throws {
        txn.cache?.dropOps()
        try txn.lmdb.empty(database(txn))
    }

    /// The pending ops of `state`, tree by tree, each tree's in order, from its `since` on (a
    /// dropped view's too: they stay until the stream is emptied).
    static func opsByTree(_ state: BufferState, _ txn: StoreTransaction) throws -> [UInt32: [(
        insert: Bool, key: [UInt8]
    )]] {
        var ops: [UInt32: [(insert: Bool, key: [UInt8])]] = [:]
        try forEachOp(state.firstOp..<state.nextOp, txn) { number, tree, insert, key in
            if number >= state.since(of: tree) { ops[tree, default: []].append((insert, key)) }
        }
        return ops
    }

    /// `tree`'s first `limit` ops of `range`, in order, and the number of its next op in `range`
    /// (nil when it has no more): the records after that are not read.
    static func ops(of tree: UInt32, in range: Range<UInt64>, atMost limit: Int, _ txn: StoreTransaction) throws
        -> (ops: [(insert: Bool, key: [UInt8])], next: UInt64?)
    {
        var ops: [(insert: Bool, key: [UInt8])] = []
        var next: UInt64?
        try forEachRecord(range, txn) { number, record in
            guard record.count >= 5 else { throw StoreError.corrupted("a view op of \(record.count) bytes") }
            guard record.loadUnaligned(as: UInt32.self).littleEndian == tree else { return true }
            guard ops.count < limit else {
                next = number
                return false
            }
            ops.append((record[4] == 1, opKey(record)))
            return true
        }
        return (ops, next)
    }

    /// The ops of a merge round's trees before its end, read in one pass over the stream at the
    /// first whole turn that needs them and kept (in the write, then in the store once it commits)
    /// for the next turns, which would each read every op of the round to find their own: with five
    /// views, four passes over 65,536 records a round for nothing. Immutable; lost on a restart,
    /// where a turn reads the stream again.
    final class RoundOps: Sendable {
        let firstOp: UInt64
        let end: UInt64
        let ops: [UInt32: [(insert: Bool, key: [UInt8])]]

        init(firstOp: UInt64, end: UInt64, ops: [UInt32: [(insert: Bool, key: [UInt8])]]) {
            self.firstOp = firstOp
            self.end = end
            self.ops = ops
        }
    }

    /// The most key bytes a `RoundOps` holds (about a quarter of a round of the longest keys):
    /// beyond, each turn reads its own ops from the stream.
    static let roundOpsBudget = 8 << 20

    /// `tree`'s ops from the stream's first op (`firstOp`) to the round's `end`, for its whole
    /// turn: kept from an earlier turn of the round, or read in one pass that also keeps those of
    /// `later` (the trees whose turns follow, that take their ops whole).
    static func roundOps(
        of tree: UInt32, from firstOp: UInt64, to end: UInt64, later: [UInt32], _ txn: StoreTransaction
    ) throws
        -> [(insert: Bool, key: [UInt8])]
    {
        if let kept = txn.cache?.keptRoundOps() ?? txn.deltas?.roundOps(), kept.firstOp == firstOp, kept.end == end,
            let ops = kept.ops[tree]
        {
            return ops
        }
        guard !later.isEmpty else { return try ops(of: tree, in: firstOp..<end, txn) }
        // The trees' ops in arrays by the tree's place in `trees` (a few: found by a linear search).
        let trees = [tree] + later
        var grouped = [[(insert: Bool, key: [UInt8])]](repeating: [], count: trees.count)
        var bytes = 0
        var keeping = true
        try forEachRecord(firstOp..<end, txn) { _, record in
            guard record.count >= 5 else { throw StoreError.corrupted("a view op of \(record.count) bytes") }
            let opTree = record.loadUnaligned(as: UInt32.self).littleEndian
            guard let place = trees.firstIndex(of: opTree), place == 0 || keeping else { return true }
            if place > 0 {
                bytes += record.count
                if bytes > roundOpsBudget {
                    keeping = false
                    for other in 1..<grouped.count { grouped[other] = [] }
                    return true
                }
            }
            grouped[place].append((record[4] == 1, opKey(record)))
            return true
        }
        if keeping {
            txn.keepRoundOps(
                RoundOps(firstOp: firstOp, end: end, ops: Dictionary(uniqueKeysWithValues: zip(trees, grouped))))
        }
        return grouped[0]
    }

    /// `tree`'s ops of `range`, in order (the others' keys are not copied out).
    static func ops(of tree: UInt32, in range: Range<UInt64>, _ txn: StoreTransaction) throws -> [(
        insert: Bool, key: [UInt8]
    )] {
        try ops(of: tree, in: range, atMost: .max, txn).ops
    }

    /// Calls `body` with each op of `range`, in order.
    static func forEachOp(
        _ range: Range<UInt64>, _ txn: StoreTransaction, _ body: (UInt64, UInt32, Bool, [UInt8]) throws -> Void
    ) throws {
        try forEachRecord(range, txn) { number, record in
            let (tree, insert, opKey) = try op(record)
            try body(number, tree, insert, opKey)
            return true
        }
    }

    /// Calls `body` with each op of `range`, in order, until it returns false: its number, and its
    /// bytes as its record holds them from the tree on (tree id, kind, key).
    private static func forEachRecord(
        _ range: Range<UInt64>, _ txn: StoreTransaction, _ body: (UInt64, UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        guard !range.isEmpty else { return }
        try flushOps(txn)
        var expected = range.lowerBound
        var stopped = false
        try txn.lmdb.withCursor(database(txn)) { cursor in
            // The record that holds the first op begins at it or before it.
            var entry = try cursor.seek(atMost: opKey(range.lowerBound))
            var first = true
            records: while expected < range.upperBound, let (key, value) = entry {
                guard key.count == 8 else { break }
                var number = UInt64(bigEndian: key.loadUnaligned(as: UInt64.self))
                // Ops follow each other without a gap: a record begins where the one before ended.
                guard first ? number <= expected : number == expected else { break }
                first = false
                var offset = 0
                while offset < value.count {
                    guard value.count - offset >= 7 else {
                        throw StoreError.corrupted("a view op record of op \(number) is cut short")
                    }
                    let end =
                        offset + 7 + Int(value.loadUnaligned(fromByteOffset: offset, as: UInt16.self).littleEndian)
                    guard end <= value.count else {
                        throw StoreError.corrupted("a view op record of op \(number) is cut short")
                    }
                    if number == expected {
                        guard expected < range.upperBound else { break records }
                        guard try body(number, UnsafeRawBufferPointer(rebasing: value[(offset + 2)..<end])) else {
                            stopped = true
                            return
                        }
                        expected += 1
                    }
                    number += 1
                    offset = end
                }
                entry = try cursor.next()
            }
        }
        if !stopped, expected != range.upperBound { throw StoreError.corrupted("the view ops lack op \(expected)") }
    }
}

/// A merge round in progress: the trees that had ops when it started, in turn order, take their
/// ops before `end`; `trees[..<done]` have. `turns` were taken so far. A big tree takes its ops
/// `chunk` at a time: while `trees[done]` is part way, its nodes hold its ops before `partial`.
struct MergeRound: Equatable {
    var end: UInt64
    var done: Int
    var trees: [UInt32]
    var turns: Int
    /// Ops a turn of a big tree takes (`ViewBuffer.chunk`), set when the round starts.
    var chunk: Int
    /// The first op of `trees[done]` its nodes do not hold, once it took a chunk.
    var partial: UInt64?

    init(end: UInt64, done: Int = 0, trees: [UInt32], turns: Int = 0, chunk: Int = 0, partial: UInt64? = nil) {
        self.end = end
        self.done = done
        self.trees = trees
        self.turns = turns
        self.chunk = chunk
        self.partial = partial
    }

    var merged: ArraySlice<UInt32> { trees[..<done] }
}

/// Where the op stream stands: its ops `firstOp ..< nextOp`, the merges (rounds) so far, the round
/// in progress, and the key count (ops included) of each tree that has ops pending.
///
/// Stored as epoch, firstOp, nextOp (u64 little-endian), then (tree u32, count u64) per tree; with a
/// round in progress, `UInt64.max - 1` first, then those three, the round's end (u64), done and its
/// number of trees (u32 each), its trees (u32 each), turns and chunk (u32 each) and partial (u64,
/// `UInt64.max` for none), then the counts (store format 7). A round of format 6 has `UInt64.max`
/// first and ends with its trees: no turns, chunk or partial.
struct BufferState {
    var epoch: UInt64 = 0
    var firstOp: UInt64 = 0
    var nextOp: UInt64 = 0
    var round: MergeRound?
    /// Ascending by tree.
    var counts: [(tree: UInt32, count: UInt64)] = []

    var pending: Int { Int(nextOp - firstOp) }

    /// The first op of `tree` its nodes do not hold.
    func since(of tree: UInt32) -> UInt64 {
        guard let round else { return firstOp }
        if round.merged.contains(tree) { return round.end }
        if let partial = round.partial, round.trees[round.done] == tree { return partial }
        return firstOp
    }

    static let roundMark = UInt64.max - 1
    static let formatSixRoundMark = UInt64.max

    init() {}

    init(_ bytes: [UInt8]) throws {
        self = try bytes.withUnsafeBytes { try BufferState($0) }
    }

    /// Decoded where LMDB holds it: a page of a buffered view reads the state once, and an array
    /// copy of it, with `counts` grown an entry at a time, took five allocations of a page's ~22.
    /// A record too short for what it says it holds is `corrupted`.
    init(_ bytes: UnsafeRawBufferPointer) throws {
        func damaged(_ what: String) -> StoreError {
            StoreError.corrupted("the view ops' state (\(bytes.count) bytes) \(what)")
        }
        var offset = 0
        let mark = bytes.count >= 8 ? bytes.loadLittleEndian(UInt64.self, at: 0) : 0
        let withRound = mark == Self.roundMark || mark == Self.formatSixRoundMark
        if withRound { offset = 8 }
        guard offset + 24 <= bytes.count else { throw damaged("is cut short") }
        epoch = bytes.loadLittleEndian(UInt64.self, at: offset)
        firstOp = bytes.loadLittleEndian(UInt64.self, at: offset + 8)
        nextOp = bytes.loadLittleEndian(UInt64.self, at: offset + 16)
        offset += 24
        if withRound {
            guard offset + 16 <= bytes.count else { throw damaged("is cut short in its merge round") }
            let end = bytes.loadLittleEndian(UInt64.self, at: offset)
            let done = Int(bytes.loadLittleEndian(UInt32.self, at: offset + 8))
            let count = Int(bytes.loadLittleEndian(UInt32.self, at: offset + 12))
            offset += 16
            let tail = mark == Self.roundMark ? 16 : 0
            guard offset + tail <= bytes.count, count <= (bytes.count - offset - tail) / 4, done <= count else {
                throw damaged("holds a merge round of \(count) trees, \(done) done")
            }
            let trees = (0..<count).map { bytes.loadLittleEndian(UInt32.self, at: offset + 4 * $0) }
            offset += 4 * count
            if mark == Self.roundMark {
                let turns = Int(bytes.loadLittleEndian(UInt32.self, at: offset))
                let chunk = Int(bytes.loadLittleEndian(UInt32.self, at: offset + 4))
                let partial = bytes.loadLittleEndian(UInt64.self, at: offset + 8)
                offset += 16
                round = MergeRound(
                    end: end, done: done, trees: trees, turns: turns, chunk: chunk,
                    partial: partial == .max ? nil : partial)
            } else {
                // A round of format 6: each tree merged took one turn; its trees take their ops whole.
                round = MergeRound(end: end, done: done, trees: trees, turns: done, chunk: 0)
            }
        }
        counts.reserveCapacity(max(0, bytes.count - offset) / 12)
        while offset + 12 <= bytes.count {
            counts.append(
                (bytes.loadLittleEndian(UInt32.self, at: offset), bytes.loadLittleEndian(UInt64.self, at: offset + 4)))
            offset += 12
        }
    }

    var bytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64 + 12 * counts.count + 4 * (round?.trees.count ?? 0))
        if round != nil { bytes.appendLittleEndian(Self.roundMark) }
        bytes.appendLittleEndian(epoch)
        bytes.appendLittleEndian(firstOp)
        bytes.appendLittleEndian(nextOp)
        if let round {
            bytes.appendLittleEndian(round.end)
            bytes.appendLittleEndian(UInt32(round.done))
            bytes.appendLittleEndian(UInt32(round.trees.count))
            for tree in round.trees { bytes.appendLittleEndian(tree) }
            bytes.appendLittleEndian(UInt32(round.turns))
            bytes.appendLittleEndian(UInt32(round.chunk))
            bytes.appendLittleEndian(round.partial ?? .max)
        }
        for (tree, count) in counts {
            bytes.appendLittleEndian(tree)
            bytes.appendLittleEndian(count)
        }
        return bytes
    }

    /// The tree's key count with its ops, nil when it has none pending.
    func count(of tree: UInt32) -> UInt64? {
        counts.first { $0.tree == tree }?.count
    }

    mutating func setCount(_ count: UInt64?, of tree: UInt32) {
        let index = counts.firstIndex { $0.tree >= tree } ?? counts.count
        let present = index < counts.count && counts[index].tree == tree
        switch (count, present) {
        case (let count?, true): counts[index].count = count
        case (let count?, false): counts.insert((tree, count), at: index)
        case (nil, true): counts.remove(at: index)
        case (nil, false): break
        }
    }
}

/// What a tree's ops from op `since` amount to, key by key, as of op `nextOp`: immutable, shared
/// between the threads that read the same state. Kept in segments of up to `segmentLimit` keys, so
/// that the next state's resolution copies only the segments its ops touch and the segments' list,
/// not every key (a read after each commit would otherwise copy them all).
final class BufferedDelta: Sendable {
    struct Entry: Sendable {
        let key: [UInt8]
        /// Whether the tree holds the key (the key's first op was a removal).
        let inTree: Bool
        /// Whether the view holds it after the ops (its last op was an insert).
        let present: Bool
        /// The key's rank in the tree (keys less than it), or -1 if not worked out.
        let treeRank: Int

        var isChange: Bool { inTree != present }
    }

    /// A key the view holds and the tree does not (`added`), or the reverse.
    struct Change: Sendable {
        let key: [UInt8]
        let added: Bool
        let treeRank: Int
    }

    /// Keys of a range, ascending, with their changes and, before each change, how many of the
    /// segment's changes add a key.
    final class Segment: Sendable {
        let entries: [Entry]
        let changes: [Change]
        let addedBefore: [Int32]
        /// Whether every change has its rank in the tree.
        let ranked: Bool

        init(_ entries: [Entry]) {
            self.entries = entries
            var changes: [Change] = []
            var added: [Int32] = [0]
            for entry in entries where entry.isChange {
                changes.append(Change(key: entry.key, added: entry.present, treeRank: entry.treeRank))
                added.append(added[added.count - 1] + (entry.present ? 1 : 0))
            }
            self.changes = changes
            addedBefore = added
            ranked = changes.allSatisfy { $0.treeRank >= 0 }
        }
    }

    static let segmentLimit = 64

    /// The tree's first op its nodes do not hold (`BufferState.since(of:)`).
    let since: UInt64
    let nextOp: UInt64
    /// Whether every change has its tree rank.
    let ranked: Bool
    let segments: [Segment]
    /// Per segment, the changes, and of them the added ones, in the segments before it (one more
    /// element than `segments`: the totals).
    private let changeStart: [Int]
    private let addedStart: [Int]

    init(since: UInt64, nextOp: UInt64, segments: [Segment], ranked: Bool) {
        self.since = since
        self.nextOp = nextOp
        self.segments = segments
        self.ranked = ranked
        var changes = [0]
        var added = [0]
        changes.reserveCapacity(segments.count + 1)
        added.reserveCapacity(segments.count + 1)
        for segment in segments {
            changes.append(changes[changes.count - 1] + segment.changes.count)
            added.append(added[added.count - 1] + Int(segment.addedBefore[segment.addedBefore.count - 1]))
        }
        changeStart = changes
        addedStart = added
    }

    var changeCount: Int { changeStart[changeStart.count - 1] }
    var netChange: Int { 2 * addedStart[addedStart.count - 1] - changeCount }

    /// The segment holding change `index` (< `changeCount`), and the change's place in it.
    private func locate(_ index: Int) -> (segment: Int, offset: Int) {
        var low = 0
        var high = segments.count - 1
        // The last segment that starts at or before `index` (segments without changes share a
        // start with the next one, which holds the change).
        while low < high {
            let middle = (low + high + 1) / 2
            if changeStart[middle] <= index { low = middle } else { high = middle - 1 }
        }
        return (low, index - changeStart[low])
    }

    func change(_ index: Int) -> Change {
        let (segment, offset) = locate(index)
        return segments[segment].changes[offset]
    }

    /// The added changes among the first `index` (≤ `changeCount`).
    func addedBefore(_ index: Int) -> Int {
        if index >= changeCount { return addedStart[addedStart.count - 1] }
        let (segment, offset) = locate(index)
        return addedStart[segment] + Int(segments[segment].addedBefore[offset])
    }

    func removedBefore(_ index: Int) -> Int { min(index, changeCount) - addedBefore(index) }

    /// Every change, ascending (for a merge and checks).
    var allChanges: [Change] { segments.flatMap(\.changes) }

    /// The first change whose key is ≥ `key` (> with `strictly`).
    func lowerBound<K: Collection<UInt8>>(_ key: K, strictly: Bool = false) -> Int {
        func before(_ other: [UInt8]) -> Bool {
            let order = compareBytes(other, key)
            return order < 0 || (strictly && order == 0)
        }
        // The first segment whose last key is not before `key`.
        var low = 0
        var high = segments.count
        while low < high {
            let middle = (low + high) / 2
            if before(segments[middle].entries[segments[middle].entries.count - 1].key) {
                low = middle + 1
            } else {
                high = middle
            }
        }
        guard low < segments.count else { return changeCount }
        let changes = segments[low].changes
        var first = 0
        var last = changes.count
        while first < last {
            let middle = (first + last) / 2
            if before(changes[middle].key) { first = middle + 1 } else { last = middle }
        }
        return changeStart[low] + first
    }

    /// The ops' indices by key, in their order within a key, each with its key's first eight
    /// bytes as one big-endian integer (shorter keys padded with zeros). Keys are compared by that
    /// integer first, and in full only when it is equal.
    static func orderByKey(_ ops: [(insert: Bool, key: [UInt8])]) -> [(prefix: UInt64, index: Int)] {
        var order: [(prefix: UInt64, index: Int)] = []
        order.reserveCapacity(ops.count)
        for (index, op) in ops.enumerated() {
            let prefix = op.key.withUnsafeBytes { raw in
                if raw.count >= 8 { return UInt64(bigEndian: raw.loadUnaligned(as: UInt64.self)) }
                var value: UInt64 = 0
                for offset in 0..<raw.count { value |= UInt64(raw[offset]) << (56 - 8 * offset) }
                return value
            }
            order.append((prefix, index))
        }
        order.sort { left, right in
            if left.prefix != right.prefix { return left.prefix < right.prefix }
            let comparison = compareBytes(ops[left.index].key, ops[right.index].key)
            return comparison < 0 || (comparison == 0 && left.index < right.index)
        }
        return order
    }

    /// Whether the ops at `a` and `b` of an `orderByKey` order have the same key.
    private static func sameKey(
        _ ops: [(insert: Bool, key: [UInt8])], _ a: (prefix: UInt64, index: Int), _ b: (prefix: UInt64, index: Int)
    ) -> Bool {
        a.prefix == b.prefix && compareBytes(ops[a.index].key, ops[b.index].key) == 0
    }

    /// What `ops` change, key by key, ascending: a merge's changes (`building(...).allChanges`
    /// without the segments a reader's resolution keeps, nor ranks).
    static func netChanges(_ ops: [(insert: Bool, key: [UInt8])]) -> [Change] {
        let order = orderByKey(ops)
        var changes: [Change] = []
        changes.reserveCapacity(order.count)
        var start = 0
        while start < order.count {
            var end = start + 1
            while end < order.count && sameKey(ops, order[end], order[start]) { end += 1 }
            // The tree holds the key if its first op removes it; the view, if its last adds it.
            let first = ops[order[start].index]
            if first.insert == ops[order[end - 1].index].insert {
                changes.append(Change(key: first.key, added: first.insert, treeRank: -1))
            }
            start = end
        }
        return changes
    }

    /// `base` (same `since`, ops before `base.nextOp`) followed by `ops`, in order. `rank` gives a
    /// key's rank in the tree, for every change when given.
    static func building(
        on base: BufferedDelta?, since: UInt64, nextOp: UInt64, ops: [(insert: Bool, key: [UInt8])],
        rank: (([UInt8]) throws -> Int)?
    ) throws -> BufferedDelta {
        let order = orderByKey(ops)
        var touched: [Entry] = []
        var start = 0
        while start < order.count {
            var end = start + 1
            while end < order.count && sameKey(ops, order[end], order[start]) { end += 1 }
            let first = ops[order[start].index]
            touched.append(
                Entry(key: first.key, inTree: !first.insert, present: ops[order[end - 1].index].insert, treeRank: -1))
            start = end
        }
        let old = base?.segments ?? []
        var segments: [Segment] = []
        segments.reserveCapacity(old.count + touched.count / segmentLimit + 1)
        // Each old segment takes the touched keys up to its last (the last segment, every key after).
        var next = 0
        func rebuilt(_ entries: [Entry], _ news: ArraySlice<Entry>) throws {
            var merged: [Entry] = []
            merged.reserveCapacity(entries.count + news.count)
            var index = 0
            var newIndex = news.startIndex
            func keep(_ entry: Entry) throws {
                var entry = entry
                if entry.isChange && entry.treeRank < 0, let rank {
                    entry = Entry(
                        key: entry.key, inTree: entry.inTree, present: entry.present, treeRank: try rank(entry.key))
                }
                merged.append(entry)
            }
            while index < entries.count || newIndex < news.endIndex {
                if newIndex == news.endIndex {
                    try keep(entries[index])
                    index += 1
                } else if index == entries.count {
                    try keep(news[newIndex])
                    newIndex += 1
                } else {
                    let comparison = compareBytes(entries[index].key, news[newIndex].key)
                    if comparison < 0 {
                        try keep(entries[index])
                        index += 1
                    } else if comparison > 0 {
                        try keep(news[newIndex])
                        newIndex += 1
                    } else {
                        let was = entries[index]
                        try keep(
                            Entry(
                                key: was.key, inTree: was.inTree, present: news[newIndex].present,
                                treeRank: was.treeRank))
                        index += 1
                        newIndex += 1
                    }
                }
            }
            var from = 0
            while from < merged.count {
                // Halves of a full segment, so that the next keys it takes do not split it again at once.
                let size = merged.count - from > 2 * segmentLimit ? segmentLimit : merged.count - from
                segments.append(Segment(Array(merged[from..<(from + size)])))
                from += size
            }
        }
        for (position, segment) in old.enumerated() {
            var end = next
            if position == old.count - 1 {
                end = touched.count
            } else {
                let last = segment.entries[segment.entries.count - 1].key
                while end < touched.count && compareBytes(touched[end].key, last) <= 0 { end += 1 }
            }
            if end == next && (rank == nil || segment.ranked) {
                segments.append(segment)
            } else {
                try rebuilt(segment.entries, touched[next..<end])
            }
            next = end
        }
        if old.isEmpty { try rebuilt([], touched[...]) }
        return BufferedDelta(since: since, nextOp: nextOp, segments: segments, ranked: rank != nil)
    }
}

/// The latest resolution of each buffered tree that a read snapshot worked out, for the next reads
/// of the same or a later state (one per tree: readers mostly read the newest state). Only
/// committed states go in; a write keeps its own in its `TreeNodeCache`.
final class ViewDeltaCache: Sendable {
    private let latest = Mutex<[UInt32: BufferedDelta]>([:])
    /// The current merge round's ops as a committed write read them (`ViewBuffer.roundOps`).
    private let round = Mutex<ViewBuffer.RoundOps?>(nil)

    func roundOps() -> ViewBuffer.RoundOps? { round.withLock { $0 } }

    /// A committed write's change to the round's ops: kept, or dropped (nil) when its round ended.
    func setRoundOps(_ ops: ViewBuffer.RoundOps?) { round.withLock { $0 = ops } }

    func lookup(_ tree: UInt32) -> BufferedDelta? { latest.withLock { $0[tree] } }

    func install(_ delta: BufferedDelta, tree: UInt32) {
        latest.withLock { table in
            if let current = table[tree],
                current.since > delta.since || (current.since == delta.since && current.nextOp >= delta.nextOp)
            {
                return
            }
            table[tree] = delta
        }
    }

    func forget(_ tree: UInt32) { _ = latest.withLock { $0.removeValue(forKey: tree) } }

    /// Tree ids start again when a store is rebuilt.
    func removeAll() {
        latest.withLock { $0.removeAll() }
        setRoundOps(nil)
    }
}
