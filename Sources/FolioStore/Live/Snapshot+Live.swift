import FolioJSON
import FolioModel

/// One object of a live query's window: its key in the query's order and its wire JSON.
public struct LiveEntry: Sendable {
    public let key: [UInt8]
    public let id: String
    public let version: UInt64
    public let object: [UInt8]

    public init(key: [UInt8], object: StoredObject) {
        self.key = key
        id = object.id
        version = object.version
        var writer = JSONWriter(capacity: 256)
        object.write(to: &writer)
        self.object = writer.bytes
    }

    init(key: [UInt8], id: String, version: UInt64, object: [UInt8]) {
        self.key = key
        self.id = id
        self.version = version
        self.object = object
    }
}

/// The objects of one collection that events after `sequence` changed, each as it was at
/// `sequence` (nil: it did not exist then). A snapshot whose head is past `sequence` reads the
/// state at `sequence` by putting these back: every other object is as it was.
public struct LiveRewind: Sendable {
    public let sequence: UInt64
    /// The snapshot's head.
    public let head: UInt64
    let states: [String: StoredObject?]

    public var isEmpty: Bool { states.isEmpty }
}

extension Snapshot {
    /// What `collection` looked like at `sequence` (at most the head), as the objects changed since
    /// and their states then: O(e log n) for the e events after `sequence`, each changed object's
    /// state read from its history. Nil when more than `maxEvents` events follow `sequence`.
    public func liveRewind(of collection: String, to sequence: UInt64, maxEvents: Int) throws -> LiveRewind? {
        let head = try head().sequence
        guard sequence <= head else {
            throw StoreError.invalid("sequence \(sequence) is beyond the last event, \(head)")
        }
        guard head - sequence <= UInt64(maxEvents) else { return nil }
        var ids: [String] = []
        var seen = Set<String>()
        try log.forEach(after: sequence, txn) { eventSequence, record in
            guard EventLog.collection(ofRecord: record) == collection else { return true }
            if let object = try EventLog.decode(record, sequence: eventSequence).object,
                object.collection == collection,
                seen.insert(object.id).inserted
            {
                ids.append(object.id)
            }
            return true
        }
        var states: [String: StoredObject?] = [:]
        for id in ids {
            states[id] =
                sequence == 0 ? nil : try store.applier.history.state(collection, id, through: sequence, log: log, txn)
        }
        return LiveRewind(sequence: sequence, head: head, states: states)
    }

    /// The live query's objects at `rewind.sequence` that come after `boundary` in its order (all
    /// of them from the first when nil), at most `count`, in order; `complete` when no more follow.
    /// O(log n + count + r) from a view or the creation-order tree, r the rewound objects; O(n) for
    /// a query without an index.
    public func liveEntries(_ live: LiveQuery, rewind: LiveRewind, after boundary: [UInt8]?, count: Int) throws
        -> (entries: [LiveEntry], complete: Bool)
    {
        // The rewound objects as they were, where they belong: they are read from here, not below.
        var rewound: [LiveEntry] = []
        for case (_, let state?) in rewind.states {
            guard let key = live.key(for: state), boundary.map({ live.precedes($0, key) }) ?? true else { continue }
            rewound.append(LiveEntry(key: key, object: state))
        }
        var current: [LiveEntry] = []
        var exhausted = true
        func take(_ key: [UInt8], _ object: StoredObject) -> Bool {
            guard current.count < count else {
                exhausted = false
                return false
            }
            current.append(LiveEntry(key: key, object: object))
            return true
        }
        switch live.index {
        case .view, .creationOrder:
            if let tree = try tree(of: live) {
                let forward = !live.descending
                let end = live.prefix.isEmpty ? nil : RefIndex.end(of: live.prefix)
                let position: CountedTree.Position
                if let boundary {
                    position = try tree.position(of: boundary, strictly: forward, storeTxn)
                } else if forward {
                    position = try tree.position(of: live.prefix, storeTxn)
                } else {
                    position =
                        try end.map { try tree.position(of: $0, storeTxn) }
                        ?? tree.position(atRank: try tree.count(storeTxn), storeTxn)
                }
                try tree.scan(from: position, forward: forward, storeTxn) { slice in
                    let key = Array(slice)
                    guard key.starts(with: live.prefix) else { return false }
                    if let boundary, !live.precedes(boundary, key) { return true }
                    let id = key.withUnsafeBytes { SortKey.id(in: $0) }
                    if rewind.states[id] != nil { return true }
                    guard let object = try objects.get(live.collection, id, txn) else {
                        throw StoreError.corrupted("an index of \(live.collection) lists \(id), which does not exist")
                    }
                    return take(key, object)
                }
            }
        case .scan:
            var all: [LiveEntry] = []
            try objects.forEach(in: live.collection, txn) { object in
                guard rewind.states[object.id] == nil, let key = live.key(for: object),
                    boundary.map({ live.precedes($0, key) }) ?? true
                else { return true }
                all.append(LiveEntry(key: key, object: object))
                return true
            }
            all.sort { live.precedes($0.key, $1.key) }
            current = Array(all.prefix(count))
            exhausted = all.count <= count
        }
        var merged = current + rewound
        merged.sort { live.precedes($0.key, $1.key) }
        let complete = exhausted && merged.count <= count
        return (Array(merged.prefix(count)), complete)
    }

    /// How many objects the live query holds at `rewind.sequence`: an index's count corrected for
    /// the rewound objects, O(log n + r); a count of the collection without one, O(n).
    public func liveTotal(_ live: LiveQuery, rewind: LiveRewind) throws -> Int {
        var total = 0
        switch live.index {
        case .view, .creationOrder:
            if let tree = try tree(of: live) {
                if live.prefix.isEmpty {
                    total = try tree.count(storeTxn)
                } else {
                    let (lower, upper) = try tree.ranks(of: live.prefix, and: RefIndex.end(of: live.prefix), storeTxn)
                    total = upper - lower
                }
            }
            for (id, state) in rewind.states {
                if live.key(for: try objects.get(live.collection, id, txn)) != nil { total -= 1 }
                if live.key(for: state) != nil { total += 1 }
            }
        case .scan:
            try objects.forEach(in: live.collection, txn) { object in
                if rewind.states[object.id] == nil, live.key(for: object) != nil { total += 1 }
                return true
            }
            for case (_, let state?) in rewind.states where live.key(for: state) != nil { total += 1 }
        }
        return total
    }

    /// The tree a live query reads; nil for a collection that never had an object.
    private func tree(of live: LiveQuery) throws -> CountedTree? {
        switch live.index {
        case .view(let name):
            guard let view = try catalog.view(name, storeTxn) else { throw StoreError.viewNotFound(name) }
            return view.tree
        case .creationOrder:
            return try catalog.collectionTree(live.collection, storeTxn)
        case .scan:
            return nil
        }
    }
}
