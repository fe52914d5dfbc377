import FolioJSON
import FolioModel

/// The state of a live query at one sequence: the first objects of its order (the window the
/// client sees, and a few more kept so that removals seldom need the store), and how many objects
/// it holds in all. Kept current from the objects before and after each committed event, which the
/// writer hands over: O(log w) per event that touches the query's collection, w the entries kept.
///
/// The entries are exactly the query's objects up to `bound` in its order: an event moves an
/// object out of them or into them by its keys before and after, and leaves the rest alone.
public struct LiveWindow: Sendable {
    /// How far the entries reach: every object of the query, those up to a key, or none.
    enum Bound: Sendable, Equatable {
        case everything
        case key([UInt8])
        case nothing
    }

    public private(set) var query: LiveQuery
    /// The last event this window reflects.
    public private(set) var sequence: UInt64
    /// How many objects the query holds.
    public private(set) var total: Int
    private(set) var entries: [LiveEntry]
    private(set) var bound: Bound
    /// The most entries kept: the window and as many again (at least 16) that removals eat into
    /// before the store is read.
    let capacity: Int
    /// An event left the entries in a state they cannot have (an object to remove that is not
    /// there): the window must be read again.
    public private(set) var broken = false

    public static func capacity(forLimit limit: Int) -> Int { limit == 0 ? 0 : limit + max(16, limit) }

    /// The window of `query` at `rewind.sequence`, read from `snapshot`.
    public init(_ query: LiveQuery, snapshot: Snapshot, rewind: LiveRewind) throws {
        self.query = query
        sequence = rewind.sequence
        capacity = Self.capacity(forLimit: query.limit)
        total = try snapshot.liveTotal(query, rewind: rewind)
        if capacity == 0 {
            entries = []
            bound = .nothing
        } else {
            let (read, complete) = try snapshot.liveEntries(query, rewind: rewind, after: nil, count: capacity)
            entries = read
            bound = complete ? .everything : .key(read.last!.key)
        }
    }

    /// The objects the client sees: the first `limit`.
    public var visible: ArraySlice<LiveEntry> { entries.prefix(query.limit) }

    /// The visible objects by id and version, to tell a change from.
    public var visibleVersions: [(id: String, version: UInt64)] { visible.map { ($0.id, $0.version) } }

    /// Applies one committed event (of any collection; others change nothing). Events at or
    /// before `sequence` were applied already and are skipped.
    public mutating func apply(_ applied: StoreWriter.Applied) throws {
        guard applied.event.object?.collection == query.collection else { return advance(to: applied.event.sequence) }
        try apply(applied, keys: (query.key(for: applied.before), query.key(for: applied.object)))
    }

    /// `apply` with the object's keys before and after the event in this query (nil: it does not
    /// belong), computed by the caller, once for all queries of one order (`orderIdentity`).
    public mutating func apply(_ applied: StoreWriter.Applied, keys: (old: [UInt8]?, new: [UInt8]?)) throws {
        let eventSequence = applied.event.sequence
        guard eventSequence > sequence else { return }
        sequence = eventSequence
        if let oldKey = keys.old {
            total -= 1
            if holds(oldKey) {
                let index = position(of: oldKey)
                if index < entries.count && entries[index].key == oldKey {
                    entries.remove(at: index)
                } else {
                    broken = true
                }
            }
        }
        if let object = applied.object, let newKey = keys.new {
            total += 1
            if holds(newKey) {
                var writer = JSONWriter(capacity: (applied.record?.count ?? 64) + 128)
                if try !applied.writeObject(to: &writer) { object.write(to: &writer) }
                entries.insert(
                    LiveEntry(key: newKey, id: object.id, version: object.version, object: writer.bytes),
                    at: position(of: newKey))
            }
        }
    }

    /// Marks the window as reflecting every event up to `last` (the end of a commit whose events
    /// touched nothing of it, or that it did not see because none were of its collection).
    public mutating func advance(to last: UInt64) {
        sequence = max(sequence, last)
    }

    /// After a commit's events: keeps at most `capacity` entries; notes when they are all there are.
    public mutating func trim() {
        if entries.count > capacity {
            entries.removeLast(entries.count - capacity)
            bound = .key(entries.last!.key)
        }
        if case .key = bound, entries.count == total { bound = .everything }
    }

    /// Whether fewer entries than the window remain while the query holds more: `fill` must read
    /// the next ones from the store.
    public var needsEntries: Bool {
        guard case .key = bound else { return false }
        return entries.count < query.limit
    }

    /// Reads the objects after the entries from `snapshot`, rewound to this window's sequence, up
    /// to `capacity`.
    public mutating func fill(from snapshot: Snapshot, rewind: LiveRewind) throws {
        guard case .key(let last) = bound else { return }
        precondition(rewind.sequence == sequence, "a window is filled from its own sequence")
        let (more, complete) = try snapshot.liveEntries(
            query, rewind: rewind, after: last, count: capacity - entries.count)
        entries.append(contentsOf: more)
        bound = complete ? .everything : .key(entries.last.map(\.key) ?? last)
    }

    /// The same query once the view it reads is gone: filled by reading its collection from now on.
    public mutating func dropIndex() { query = query.withoutIndex() }

    private func holds(_ key: [UInt8]) -> Bool {
        switch bound {
        case .everything: return true
        case .nothing: return false
        case .key(let last): return !query.precedes(last, key)
        }
    }

    /// Where `key` is, or would go, among the entries.
    private func position(of key: [UInt8]) -> Int {
        entries.partitioningIndex { !query.precedes($0.key, key) }
    }
}
