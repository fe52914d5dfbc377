import FolioJSON
import FolioModel

/// What turns one window of a live query into the next, by position: applied to the old window
/// (removals from the highest index down, then insertions from the lowest up, then updates), it
/// gives the new one exactly. Items that stay keep their relative order unless listed as moved;
/// the moves are as few as can be (the items kept in place are a longest run in the same order).
public struct LiveChange: Sendable {
    public var sequence: UInt64
    /// Indices in the old window.
    public var removed: [(index: Int, id: String)] = []
    /// Indices in the new window.
    public var inserted: [(index: Int, object: [UInt8])] = []
    /// Indices in the new window; the item may also be moved.
    public var updated: [(index: Int, object: [UInt8])] = []
    /// From an index in the old window to one in the new.
    public var moved: [(from: Int, to: Int, id: String)] = []
    public var total: Int

    /// The change from `old` (ids and versions, in order) to `new`.
    public init(
        from old: [(id: String, version: UInt64)], to new: some Collection<LiveEntry>, sequence: UInt64, total: Int
    ) {
        self.sequence = sequence
        self.total = total
        var oldIndex: [String: Int] = [:]
        oldIndex.reserveCapacity(old.count)
        for (index, item) in old.enumerated() { oldIndex[item.id] = index }
        var kept = Set<String>()
        kept.reserveCapacity(new.count)
        // The old positions of the items in both, in their new order: those in a longest increasing
        // run stay; the others move.
        var common: [(newIndex: Int, oldIndex: Int)] = []
        for (index, entry) in new.enumerated() {
            kept.insert(entry.id)
            if let before = oldIndex[entry.id] {
                common.append((index, before))
                if old[before].version != entry.version { updated.append((index, entry.object)) }
            } else {
                inserted.append((index, entry.object))
            }
        }
        for (index, item) in old.enumerated() where !kept.contains(item.id) { removed.append((index, item.id)) }
        let staying = Self.longestIncreasingRun(common.map(\.oldIndex))
        for (position, pair) in common.enumerated() where !staying.contains(position) {
            moved.append((pair.oldIndex, pair.newIndex, old[pair.oldIndex].id))
        }
        moved.sort { $0.to < $1.to }
    }

    /// Whether the windows were the same (`total` aside).
    public var isEmpty: Bool { removed.isEmpty && inserted.isEmpty && updated.isEmpty && moved.isEmpty }

    /// Positions (in `values`) of one longest strictly increasing subsequence: O(n log n).
    static func longestIncreasingRun(_ values: [Int]) -> Set<Int> {
        var tails: [Int] = []  // positions in `values` ending the best run of each length
        var previous = [Int](repeating: -1, count: values.count)
        for (position, value) in values.enumerated() {
            let length = tails.partitioningIndex { values[$0] >= value }
            if length > 0 { previous[position] = tails[length - 1] }
            if length == tails.count { tails.append(position) } else { tails[length] = position }
        }
        var run = Set<Int>()
        var position = tails.last ?? -1
        while position >= 0 {
            run.insert(position)
            position = previous[position]
        }
        return run
    }

    /// `{"seq":…,"removed":[{"index","id"}],"inserted":[{"index","object"}],"updated":[…],"moved":[{"from","to","id"}],"total":…}`
    public func write(to writer: inout JSONWriter) {
        writer.writeRaw("{\"seq\":")
        writer.write(sequence)
        writer.writeRaw(",\"removed\":[")
        for (position, item) in removed.enumerated() {
            if position > 0 { writer.bytes.append(UInt8(ascii: ",")) }
            writer.writeRaw("{\"index\":")
            writer.write(UInt64(item.index))
            writer.writeRaw(",\"id\":")
            writer.write(item.id)
            writer.bytes.append(UInt8(ascii: "}"))
        }
        writer.writeRaw("],\"inserted\":")
        Self.write(inserted, to: &writer)
        writer.writeRaw(",\"updated\":")
        Self.write(updated, to: &writer)
        writer.writeRaw(",\"moved\":[")
        for (position, item) in moved.enumerated() {
            if position > 0 { writer.bytes.append(UInt8(ascii: ",")) }
            writer.writeRaw("{\"from\":")
            writer.write(UInt64(item.from))
            writer.writeRaw(",\"to\":")
            writer.write(UInt64(item.to))
            writer.writeRaw(",\"id\":")
            writer.write(item.id)
            writer.bytes.append(UInt8(ascii: "}"))
        }
        writer.writeRaw("],\"total\":")
        writer.write(UInt64(total))
        writer.bytes.append(UInt8(ascii: "}"))
    }

    private static func write(_ items: [(index: Int, object: [UInt8])], to writer: inout JSONWriter) {
        writer.bytes.append(UInt8(ascii: "["))
        for (position, item) in items.enumerated() {
            if position > 0 { writer.bytes.append(UInt8(ascii: ",")) }
            writer.writeRaw("{\"index\":")
            writer.write(UInt64(item.index))
            writer.writeRaw(",\"object\":")
            writer.bytes.append(contentsOf: item.object)
            writer.bytes.append(UInt8(ascii: "}"))
        }
        writer.bytes.append(UInt8(ascii: "]"))
    }
}
