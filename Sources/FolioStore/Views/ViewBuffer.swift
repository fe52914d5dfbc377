import Foundation
import Synchronization

/// The changes of views' trees not yet merged into them: a view's inserts and removals are
/// appended as op records to one stream shared by every view, and merged into the trees many at a
/// time, so that a commit writes the page at the stream's end instead of a leaf and its branches for
/// every insert (docs/BENCHMARKS.md, "Buffered view inserts").
///
/// The stream lives in the `trees` database under tree id `streamTree`, which no tree gets: op
/// record = node id `number`, value = tree id (u32 little-endian) + kind (1 insert, 0 remove) + the
/// view key; node `UInt64.max` holds the `BufferState`. `epoch` counts the merges: between two
/// merges no tree's nodes change, so a resolution of a tree's ops of one epoch stays right for every
/// snapshot of that epoch with at least those ops.
enum ViewBuffer {
    static let streamTree = UInt32.max
    static let stateNode = UInt64.max

    /// Ops held before every tree merges them. `FOLIO_VIEW_BUFFER` overrides it (tests use a few
    /// ops to merge all the time); a store's layout depends on it, its content does not.
    static let limit: Int = {
        if let text = ProcessInfo.processInfo.environment["FOLIO_VIEW_BUFFER"], let value = Int(text), value >= 1 {
            return min(value, 1 << 20)
        }
        return 16384
    }()

    static func opKey(_ number: UInt64) -> TreeNodeCache.NodeKey { TreeNodeCache.NodeKey(tree: streamTree, node: number) }
    static var stateKey: TreeNodeCache.NodeKey { TreeNodeCache.NodeKey(tree: streamTree, node: stateNode) }

    static func record(tree: UInt32, insert: Bool, key: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(key.count + 5)
        bytes.appendLittleEndian(tree)
        bytes.append(insert ? 1 : 0)
        bytes.append(contentsOf: key)
        return bytes
    }

    /// An op record's tree, kind and key.
    static func op(_ record: UnsafeRawBufferPointer) throws -> (tree: UInt32, insert: Bool, key: [UInt8]) {
        guard record.count >= 5 else { throw StoreError.corrupted("a view op of \(record.count) bytes") }
        return (record.loadUnaligned(as: UInt32.self).littleEndian, record[4] == 1, Array(record[5...]))
    }

    static func state(_ txn: StoreTransaction) throws -> BufferState {
        try txn.treeRecord(stateKey).map(BufferState.init) ?? BufferState()
    }

    static func store(_ state: BufferState, _ txn: StoreTransaction) throws { try txn.setTreeRecord(stateKey, state.bytes) }
}

/// Where the op stream stands: its pending ops `firstOp ..< nextOp`, the merges so far, and the
/// key count (ops included) of each tree that has ops pending.
struct BufferState {
    var epoch: UInt64 = 0
    var firstOp: UInt64 = 0
    var nextOp: UInt64 = 0
    /// Ascending by tree.
    var counts: [(tree: UInt32, count: UInt64)] = []

    var pending: Int { Int(nextOp - firstOp) }

    init() {}

    init(_ bytes: [UInt8]) {
        epoch = bytes.loadLittleEndian(UInt64.self, at: 0)
        firstOp = bytes.loadLittleEndian(UInt64.self, at: 8)
        nextOp = bytes.loadLittleEndian(UInt64.self, at: 16)
        var offset = 24
        while offset + 12 <= bytes.count {
            counts.append((bytes.loadLittleEndian(UInt32.self, at: offset), bytes.loadLittleEndian(UInt64.self, at: offset + 4)))
            offset += 12
        }
    }

    var bytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24 + 12 * counts.count)
        bytes.appendLittleEndian(epoch)
        bytes.appendLittleEndian(firstOp)
        bytes.appendLittleEndian(nextOp)
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

/// What the ops of one epoch of a tree amount to, key by key, as of op `nextOp`: immutable, shared
/// between the threads that read the same state.
final class BufferedDelta: Sendable {
    struct Entry: Sendable {
        let key: [UInt8]
        /// Whether the tree holds the key (the key's first op was a removal).
        let inTree: Bool
        /// Whether the view holds it after the ops (its last op was an insert).
        let present: Bool
    }

    /// A key the view holds and the tree does not (`added`), or the reverse.
    struct Change: Sendable {
        let key: [UInt8]
        let added: Bool
        /// The key's rank in the tree (keys less than it), or -1 if not worked out.
        let treeRank: Int
    }

    let epoch: UInt64
    let nextOp: UInt64
    /// Every key an op touched, ascending.
    let entries: [Entry]
    /// The keys on which the view and the tree differ, ascending, with the number of added and of
    /// removed keys before each (`addedBefore[i]` among `changes[..<i]`; both `changes.count + 1` long).
    let changes: [Change]
    let addedBefore: [Int]
    let removedBefore: [Int]
    /// Whether every change has its tree rank.
    let ranked: Bool

    init(epoch: UInt64, nextOp: UInt64, entries: [Entry], changes: [Change], ranked: Bool) {
        self.epoch = epoch
        self.nextOp = nextOp
        self.entries = entries
        self.changes = changes
        self.ranked = ranked
        var added = [Int](repeating: 0, count: changes.count + 1)
        var removed = [Int](repeating: 0, count: changes.count + 1)
        for (index, change) in changes.enumerated() {
            added[index + 1] = added[index] + (change.added ? 1 : 0)
            removed[index + 1] = removed[index] + (change.added ? 0 : 1)
        }
        addedBefore = added
        removedBefore = removed
    }

    var netChange: Int { addedBefore[changes.count] - removedBefore[changes.count] }

    /// The first change whose key is ≥ `key` (> with `strictly`).
    func lowerBound<K: Collection<UInt8>>(_ key: K, strictly: Bool = false) -> Int {
        var low = 0
        var high = changes.count
        while low < high {
            let middle = (low + high) / 2
            let order = compareBytes(changes[middle].key, key)
            if order < 0 || (strictly && order == 0) { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// `base` (same epoch, ops before `base.nextOp`) followed by `ops`, in order. `rank` gives a
    /// key's rank in the tree, for every change when given.
    static func building(
        on base: BufferedDelta?, epoch: UInt64, nextOp: UInt64, ops: [(insert: Bool, key: [UInt8])],
        rank: (([UInt8]) throws -> Int)?
    ) throws -> BufferedDelta {
        // The ops by key, in their order within a key.
        let order = ops.indices.sorted { left, right in
            let comparison = compareBytes(ops[left].key, ops[right].key)
            return comparison < 0 || (comparison == 0 && left < right)
        }
        var touched: [Entry] = []
        var start = 0
        while start < order.count {
            var end = start + 1
            while end < order.count && ops[order[end]].key == ops[order[start]].key { end += 1 }
            let first = ops[order[start]]
            touched.append(Entry(key: first.key, inTree: !first.insert, present: ops[order[end - 1]].insert))
            start = end
        }
        let old = base?.entries ?? []
        let oldChanges = base?.changes ?? []
        var entries: [Entry] = []
        entries.reserveCapacity(old.count + touched.count)
        var changes: [Change] = []
        changes.reserveCapacity(oldChanges.count + touched.count)
        var oldIndex = 0
        var oldChange = 0
        var newIndex = 0
        func keep(_ entry: Entry) throws {
            entries.append(entry)
            guard entry.inTree != entry.present else { return }
            while oldChange < oldChanges.count && compareBytes(oldChanges[oldChange].key, entry.key) < 0 { oldChange += 1 }
            var treeRank = -1
            if oldChange < oldChanges.count && oldChanges[oldChange].key == entry.key { treeRank = oldChanges[oldChange].treeRank }
            if treeRank < 0, let rank { treeRank = try rank(entry.key) }
            changes.append(Change(key: entry.key, added: entry.present, treeRank: treeRank))
        }
        while oldIndex < old.count || newIndex < touched.count {
            if newIndex == touched.count {
                try keep(old[oldIndex])
                oldIndex += 1
            } else if oldIndex == old.count {
                try keep(touched[newIndex])
                newIndex += 1
            } else {
                let comparison = compareBytes(old[oldIndex].key, touched[newIndex].key)
                if comparison < 0 {
                    try keep(old[oldIndex])
                    oldIndex += 1
                } else if comparison > 0 {
                    try keep(touched[newIndex])
                    newIndex += 1
                } else {
                    try keep(Entry(key: old[oldIndex].key, inTree: old[oldIndex].inTree, present: touched[newIndex].present))
                    oldIndex += 1
                    newIndex += 1
                }
            }
        }
        return BufferedDelta(epoch: epoch, nextOp: nextOp, entries: entries, changes: changes, ranked: rank != nil)
    }
}

/// The latest resolution of each buffered tree that a read snapshot worked out, for the next reads
/// of the same or a later state (one per tree: readers mostly read the newest state). Only
/// committed states go in; a write keeps its own in its `TreeNodeCache`.
final class ViewDeltaCache: Sendable {
    private let latest = Mutex<[UInt32: BufferedDelta]>([:])

    func lookup(_ tree: UInt32) -> BufferedDelta? { latest.withLock { $0[tree] } }

    func install(_ delta: BufferedDelta, tree: UInt32) {
        latest.withLock { table in
            if let current = table[tree], current.epoch > delta.epoch || (current.epoch == delta.epoch && current.nextOp >= delta.nextOp) {
                return
            }
            table[tree] = delta
        }
    }

    func forget(_ tree: UInt32) { _ = latest.withLock { $0.removeValue(forKey: tree) } }

    /// Tree ids start again when a store is rebuilt.
    func removeAll() { latest.withLock { $0.removeAll() } }
}
