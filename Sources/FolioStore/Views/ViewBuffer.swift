import Foundation
import Synchronization

/// The changes of a view's tree not yet merged into it: a view's inserts and removals are appended
/// to its tree as op records (`CountedTree`'s buffered mode) and merged into the tree many at a
/// time, so that a commit writes the few pages at the end of the tree's records instead of a leaf
/// and its branches for every insert (docs/BENCHMARKS.md, "Buffered view inserts").
///
/// Op record: key = tree id + node id `opBase | number`, value = kind (1 insert, 0 remove) + the
/// view key. Ops are numbered from the tree's header (`firstOp ..< nextOp`), and `epoch` counts the
/// merges: between two merges the tree's nodes do not change, so a resolution of the ops of one
/// epoch stays right for every snapshot of that epoch with at least those ops.
enum ViewBuffer {
    static let opBase: UInt64 = 1 << 63

    /// Ops held before a tree merges them. `FOLIO_VIEW_BUFFER` overrides it (tests use a few ops to
    /// merge all the time); a store's layout depends on it, its content does not.
    static let limit: Int = {
        if let text = ProcessInfo.processInfo.environment["FOLIO_VIEW_BUFFER"], let value = Int(text), value >= 1 {
            return min(value, 1 << 20)
        }
        return 4096
    }()

    static func record(insert: Bool, key: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(key.count + 1)
        bytes.append(insert ? 1 : 0)
        bytes.append(contentsOf: key)
        return bytes
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
