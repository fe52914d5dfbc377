import Glibc

/// One node of a `CountedTree`, as the bytes stored in LMDB.
///
/// Layout (integers little-endian):
///
///     kind u8 (0 leaf, 1 branch) | entry count u16 | leaf only: previous u64, next u64
///     | offsets: (count + 1) × u16, relative to the payload | payload
///
/// A leaf's entries are keys. A branch's entries are children: node id u64, entry count u64, then the
/// fence: every key in that child is ≥ its fence (the first child's fence is not used and may be
/// empty). Edits rebuild the byte array; nodes are kept under `CountedTree.maxNodeBytes`.
struct TreeNode {
    private(set) var bytes: [UInt8]

    static let leafHeaderSize = 19
    /// Where a leaf's header holds the ids of the leaves before and after it.
    static let previousOffset = 3
    static let nextOffset = 11
    static let branchHeaderSize = 3
    /// The first byte of a branch's record (a leaf's is 0).
    static let branchKind: UInt8 = 1

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// What is wrong with `raw` as a stored node, or nil if it is laid out exactly as this type
    /// writes one: a kind of 0 or 1, the whole header and offset table, offsets from 0 that never
    /// decrease and end at the record's end, and for a branch at least one child, each entry
    /// holding a child's id and count. Every read of a node's bytes relies on this, and most of them
    /// without bounds checks, so a record read from LMDB is checked once before any other use
    /// (`StoreTransaction.treeRecord`): a damaged store is an error, not a read or a write out of
    /// bounds.
    static func problem(in raw: UnsafeRawBufferPointer) -> String? {
        guard raw.count >= branchHeaderSize else { return "a record of \(raw.count) bytes" }
        guard raw[0] <= branchKind else { return "a node of kind \(raw[0])" }
        let isBranch = raw[0] == branchKind
        let header = isBranch ? branchHeaderSize : leafHeaderSize
        guard raw.count >= header else { return "a leaf of \(raw.count) bytes" }
        let node = RawNode(raw)
        if isBranch && node.count == 0 { return "a branch without children" }
        guard node.payload <= raw.count else { return "\(node.count) entries in a record of \(raw.count) bytes" }
        guard node.offset(0) == 0 else { return "a first entry at \(node.offset(0))" }
        let least = isBranch ? 16 : 0
        var end = 0
        for index in stride(from: 1, through: node.count, by: 1) {
            let next = node.offset(index)
            guard next - end >= least else {
                return next < end
                    ? "entry \(index - 1) ends before it starts" : "child \(index - 1) of \(next - end) bytes"
            }
            end = next
        }
        guard node.payload + end == raw.count else {
            return "entries ending at \(node.payload + end) in a record of \(raw.count) bytes"
        }
        return nil
    }

    static func leaf<Keys: Collection>(previous: UInt64, next: UInt64, keys: Keys) -> TreeNode
    where Keys.Element: Collection<UInt8> {
        var header = [UInt8](repeating: 0, count: leafHeaderSize)
        header.storeLittleEndian(previous, at: previousOffset)
        header.storeLittleEndian(next, at: nextOffset)
        return TreeNode(header: header, entries: keys)
    }

    static func branch<Children: Collection>(children: Children) -> TreeNode where Children.Element: Collection<UInt8> {
        var header = [UInt8](repeating: 0, count: branchHeaderSize)
        header[0] = branchKind
        return TreeNode(header: header, entries: children)
    }

    /// A branch entry: child id, its entry count, its fence.
    static func child(_ id: UInt64, count: UInt64, fence: some Collection<UInt8>) -> [UInt8] {
        var entry = [UInt8](repeating: 0, count: 16)
        entry.storeLittleEndian(id, at: 0)
        entry.storeLittleEndian(count, at: 8)
        entry.append(contentsOf: fence)
        return entry
    }

    private init<Entries: Collection>(header: [UInt8], entries: Entries) where Entries.Element: Collection<UInt8> {
        var bytes = header
        let count = entries.count
        bytes.storeLittleEndian(UInt16(count), at: 1)
        var offset = 0
        bytes.reserveCapacity(header.count + 2 * (count + 1) + entries.reduce(0) { $0 + $1.count })
        bytes.appendLittleEndian(UInt16(0))
        for entry in entries {
            offset += entry.count
            bytes.appendLittleEndian(UInt16(offset))
        }
        for entry in entries { bytes.append(contentsOf: entry) }
        self.bytes = bytes
    }

    var isLeaf: Bool { bytes[0] != Self.branchKind }
    var count: Int { Int(bytes.loadLittleEndian(UInt16.self, at: 1)) }
    var size: Int { bytes.count }

    private var headerSize: Int { isLeaf ? Self.leafHeaderSize : Self.branchHeaderSize }
    private var payloadStart: Int { headerSize + 2 * (count + 1) }

    private func offset(_ index: Int) -> Int {
        Int(bytes.loadLittleEndian(UInt16.self, at: headerSize + 2 * index))
    }

    func range(of index: Int) -> Range<Int> {
        let start = payloadStart
        return (start + offset(index))..<(start + offset(index + 1))
    }

    func entry(_ index: Int) -> ArraySlice<UInt8> { bytes[range(of: index)] }

    var entries: [[UInt8]] { (0..<count).map { Array(entry($0)) } }

    // MARK: Leaves

    var previous: UInt64 {
        get { bytes.loadLittleEndian(UInt64.self, at: Self.previousOffset) }
        set { bytes.storeLittleEndian(newValue, at: Self.previousOffset) }
    }

    var next: UInt64 {
        get { bytes.loadLittleEndian(UInt64.self, at: Self.nextOffset) }
        set { bytes.storeLittleEndian(newValue, at: Self.nextOffset) }
    }

    /// The first index whose key is ≥ `key` (or > with `strictly`), and whether that key equals it.
    func search<K: Collection<UInt8>>(_ key: K, strictly: Bool = false) -> (index: Int, found: Bool) {
        if let result = key.withContiguousStorageIfAvailable({
            searchBytes(UnsafeRawBufferPointer($0), strictly: strictly)
        }) {
            return result
        }
        return Array(key).withUnsafeBytes { searchBytes($0, strictly: strictly) }
    }

    private func searchBytes(_ key: UnsafeRawBufferPointer, strictly: Bool) -> (index: Int, found: Bool) {
        bytes.withUnsafeBytes { raw in
            let node = RawNode(raw)
            var low = 0
            var high = node.count
            // Keys that arrive in order (the creation-order tree, a view sorted by a growing field) go
            // after the last: one comparison instead of a search.
            if high > 0 {
                let order = compareBytes(node.entry(high - 1), key)
                if order < 0 || (strictly && order == 0) { return (high, false) }
            }
            while low < high {
                let middle = (low + high) / 2
                let order = compareBytes(node.entry(middle), key)
                if order < 0 || (strictly && order == 0) { low = middle + 1 } else { high = middle }
            }
            return (low, low < node.count && compareBytes(node.entry(low), key) == 0)
        }
    }

    // MARK: Branches

    // A branch's entries hold 16 bytes or more (`problem(in:)`); these read a shorter entry, which
    // only a leaf taken for a branch in a damaged tree has, as child 0 (no node: "lacks node 0")
    // with no keys, instead of reading past it.

    func childID(_ index: Int) -> UInt64 {
        let entry = range(of: index)
        return entry.count >= 16 ? bytes.loadLittleEndian(UInt64.self, at: entry.lowerBound) : 0
    }

    func childCount(_ index: Int) -> UInt64 {
        let entry = range(of: index)
        return entry.count >= 16 ? bytes.loadLittleEndian(UInt64.self, at: entry.lowerBound + 8) : 0
    }

    func fence(_ index: Int) -> ArraySlice<UInt8> { bytes[range(of: index)].dropFirst(16) }

    mutating func setChildCount(_ index: Int, _ count: UInt64) {
        let entry = range(of: index)
        if entry.count >= 16 { bytes.storeLittleEndian(count, at: entry.lowerBound + 8) }
    }

    mutating func addToChildCount(_ index: Int, _ delta: Int) {
        setChildCount(index, UInt64(Int(childCount(index)) + delta))
    }

    /// The child to descend into for `key`: the last whose fence is ≤ key, else the first.
    func childIndex<K: Collection<UInt8>>(for key: K) -> Int {
        if let result = key.withContiguousStorageIfAvailable({ childIndexBytes(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        return Array(key).withUnsafeBytes { childIndexBytes($0) }
    }

    private func childIndexBytes(_ key: UnsafeRawBufferPointer) -> Int {
        bytes.withUnsafeBytes { raw in
            let node = RawNode(raw)
            // A branch entry is its child's id and count (16 bytes), then the fence.
            func fence(_ index: Int) -> UnsafeRawBufferPointer {
                UnsafeRawBufferPointer(rebasing: node.entry(index).dropFirst(16))
            }
            var low = 1
            var high = node.count
            // As in `search`: a key past the last fence goes to the last child at once.
            if high > 1, compareBytes(fence(high - 1), key) <= 0 { return high - 1 }
            while low < high {
                let middle = (low + high) / 2
                if compareBytes(fence(middle), key) <= 0 { low = middle + 1 } else { high = middle }
            }
            return low - 1
        }
    }

    var totalCount: UInt64 { childCounts(before: count) }

    /// The first child, among all but the last, whose keys include rank `rank` counted from the
    /// branch's first key, and the keys of the children before it; the last child (whose count is
    /// not stored) when none of the others does. One pass over the bytes.
    func child(holdingRank rank: UInt64) -> (index: Int, before: UInt64) {
        bytes.withUnsafeBytes { raw in
            let node = RawNode(raw)
            var before: UInt64 = 0
            for child in 0..<max(0, node.count - 1) {
                let count = node.childCount(child)
                if rank < before &+ count { return (child, before) }
                before &+= count
            }
            return (node.count - 1, before)
        }
    }

    /// The counts of the children before `index`, summed in one pass over the bytes (a branch's
    /// counts are read on every descent that changes it).
    func childCounts(before index: Int) -> UInt64 {
        bytes.withUnsafeBytes { raw in
            let node = RawNode(raw)
            var sum: UInt64 = 0
            for child in 0..<min(index, node.count) { sum &+= node.childCount(child) }
            return sum
        }
    }

    // MARK: Edits

    /// Inserts an entry in place: the payload and the offset table each move once; no allocation
    /// when the node's storage is uniquely held and has room.
    mutating func insert(_ entry: some Collection<UInt8>, at index: Int) {
        let n = count
        let header = headerSize
        let length = entry.count
        let start = offset(index)
        bytes.insert(contentsOf: entry, at: header + 2 * (n + 1) + start)
        bytes.withUnsafeMutableBytes { raw in
            for j in (index + 1)..<(n + 1) {
                let at = header + 2 * j
                let old = UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: at, as: UInt16.self))
                raw.storeBytes(of: (old + UInt16(length)).littleEndian, toByteOffset: at, as: UInt16.self)
            }
        }
        withUnsafeBytes(of: UInt16(start + length).littleEndian) {
            bytes.insert(contentsOf: $0, at: header + 2 * (index + 1))
        }
        bytes.storeLittleEndian(UInt16(n + 1), at: 1)
    }

    /// Removes an entry in place.
    mutating func remove(at index: Int) {
        let n = count
        let header = headerSize
        let removed = range(of: index)
        bytes.removeSubrange(removed)
        for j in (index + 1)..<(n + 1) { setOffset(j, offset(j) - removed.count) }
        bytes.removeSubrange((header + 2 * (index + 1))..<(header + 2 * (index + 2)))
        bytes.storeLittleEndian(UInt16(n - 1), at: 1)
    }

    private mutating func setOffset(_ index: Int, _ value: Int) {
        bytes.storeLittleEndian(UInt16(value), at: headerSize + 2 * index)
    }

    mutating func replace(at index: Int, with entry: [UInt8]) {
        remove(at: index)
        insert(entry, at: index)
    }

    /// Appends the entries of `other` (a node of the same kind).
    mutating func append(contentsOf other: TreeNode) {
        rebuild(entries + other.entries)
    }

    /// Keeps the first half of the entries (by bytes) and returns a node of the same kind holding the
    /// rest, its links (a leaf's previous and next) zero for the caller to set. Both are the bytes
    /// that `leaf(previous:next:keys:)` or `branch(children:)` would build from those entries (trees
    /// are compared byte for byte with their replay), cut from this node's bytes without taking the
    /// entries apart.
    mutating func splitOff() -> TreeNode {
        let n = count
        let total = offset(n)
        var running = 0
        var middle = 0
        while middle < n - 1 && running < total / 2 {
            running += offset(middle + 1) - offset(middle)
            middle += 1
        }
        middle = max(1, min(middle, n - 1))
        let header = headerSize
        let payload = header + 2 * (n + 1)
        let cut = offset(middle)

        var right = [UInt8]()
        right.reserveCapacity(header + 2 * (n - middle + 1) + total - cut)
        right.append(bytes[0])
        right.appendLittleEndian(UInt16(n - middle))
        if isLeaf { right.append(contentsOf: repeatElement(0, count: Self.leafHeaderSize - 3)) }
        for index in middle...n { right.appendLittleEndian(UInt16(offset(index) - cut)) }
        right.append(contentsOf: bytes[(payload + cut)..<(payload + total)])

        var left = [UInt8]()
        left.reserveCapacity(header + 2 * (middle + 1) + cut)
        left.append(contentsOf: bytes[0..<header])
        left.storeLittleEndian(UInt16(middle), at: 1)
        for index in 0...middle { left.appendLittleEndian(UInt16(offset(index))) }
        left.append(contentsOf: bytes[payload..<(payload + cut)])
        bytes = left
        return TreeNode(bytes: right)
    }

    private mutating func rebuild(_ all: [[UInt8]]) {
        if isLeaf {
            self = .leaf(previous: previous, next: next, keys: all)
        } else {
            self = .branch(children: all)
        }
    }
}

/// A node's bytes read in place: its entry count and each entry, without copying or bounds
/// arithmetic through the array (`TreeNode`'s searches).
struct RawNode {
    let raw: UnsafeRawBufferPointer
    let count: Int
    let header: Int
    let payload: Int

    init(_ raw: UnsafeRawBufferPointer) {
        self.raw = raw
        count = Int(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: 1, as: UInt16.self)))
        header = raw[0] == 0 ? TreeNode.leafHeaderSize : TreeNode.branchHeaderSize
        payload = header + 2 * (count + 1)
    }

    fileprivate func offset(_ index: Int) -> Int {
        Int(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: header + 2 * index, as: UInt16.self)))
    }

    func entry(_ index: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: raw[(payload + offset(index))..<(payload + offset(index + 1))])
    }

    /// A branch entry's count (its bytes 8..<16), read at its start: no slice of the entry made
    /// (0 for an entry too short to hold one, as `TreeNode.childCount`).
    func childCount(_ index: Int) -> UInt64 {
        let start = payload + offset(index)
        guard payload + offset(index + 1) - start >= 16 else { return 0 }
        return UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: start + 8, as: UInt64.self))
    }
}

/// A leaf's bytes where they lie (in LMDB's map, for a reader), checked as far as they are read:
/// a damaged record is an error, not a read out of bounds.
struct RawLeaf {
    private let node: RawNode

    /// Nil unless `raw` holds a leaf's header and offsets.
    init?(_ raw: UnsafeRawBufferPointer) {
        guard raw.count >= TreeNode.leafHeaderSize, raw[0] == 0 else { return nil }
        node = RawNode(raw)
        guard node.payload <= raw.count else { return nil }
    }

    var count: Int { node.count }
    var previous: UInt64 {
        UInt64(littleEndian: node.raw.loadUnaligned(fromByteOffset: TreeNode.previousOffset, as: UInt64.self))
    }
    var next: UInt64 {
        UInt64(littleEndian: node.raw.loadUnaligned(fromByteOffset: TreeNode.nextOffset, as: UInt64.self))
    }

    /// Entry `index` (in `0..<count`), or nil if its offsets lie outside the record.
    func entry(_ index: Int) -> UnsafeRawBufferPointer? {
        let start = node.payload + node.offset(index)
        let end = node.payload + node.offset(index + 1)
        guard start <= end && end <= node.raw.count else { return nil }
        return UnsafeRawBufferPointer(rebasing: node.raw[start..<end])
    }
}

/// Builds a leaf key by key in one buffer, for a merge that writes a tree anew
/// (`CountedTree.rebuild`): no array per key, one allocation per node.
struct LeafBuilder {
    private var payload: [UInt8] = []
    private var ends: [UInt16] = []

    init() {
        payload.reserveCapacity(CountedTree.maxNodeBytes)
        ends.reserveCapacity(256)
    }

    var count: Int { ends.count }
    var isEmpty: Bool { ends.isEmpty }

    /// The leaf's size with one more key of `bytes` bytes.
    func size(adding bytes: Int) -> Int { TreeNode.leafHeaderSize + 2 * (ends.count + 2) + payload.count + bytes }

    mutating func append(_ key: UnsafeRawBufferPointer) {
        payload.append(
            contentsOf: UnsafeBufferPointer(
                start: key.baseAddress?.assumingMemoryBound(to: UInt8.self), count: key.count))
        ends.append(UInt16(payload.count))
    }

    var firstKey: ArraySlice<UInt8> { payload[0..<Int(ends[0])] }
    var lastKey: ArraySlice<UInt8> { payload[(ends.count > 1 ? Int(ends[ends.count - 2]) : 0)..<payload.count] }

    mutating func removeAll() {
        payload.removeAll(keepingCapacity: true)
        ends.removeAll(keepingCapacity: true)
    }

    /// The leaf, laid out as `TreeNode.leaf` lays it out.
    func node(previous: UInt64, next: UInt64) -> TreeNode {
        let offsets = TreeNode.leafHeaderSize
        let start = offsets + 2 * (ends.count + 1)
        let bytes = [UInt8](unsafeUninitializedCapacity: start + payload.count) { buffer, initialized in
            let raw = UnsafeMutableRawBufferPointer(buffer)
            raw.storeBytes(of: 0, toByteOffset: 0, as: UInt8.self)
            raw.storeBytes(of: UInt16(ends.count).littleEndian, toByteOffset: 1, as: UInt16.self)
            raw.storeBytes(of: previous.littleEndian, toByteOffset: 3, as: UInt64.self)
            raw.storeBytes(of: next.littleEndian, toByteOffset: 11, as: UInt64.self)
            raw.storeBytes(of: UInt16(0), toByteOffset: offsets, as: UInt16.self)
            for (index, end) in ends.enumerated() {
                raw.storeBytes(of: end.littleEndian, toByteOffset: offsets + 2 * (index + 1), as: UInt16.self)
            }
            payload.withUnsafeBytes {
                raw.baseAddress!.advanced(by: start).copyMemory(from: $0.baseAddress!, byteCount: $0.count)
            }
            initialized = start + payload.count
        }
        return TreeNode(bytes: bytes)
    }
}

/// memcmp order: -1, 0 or 1.
func compareBytes<A: Collection<UInt8>, B: Collection<UInt8>>(_ a: A, _ b: B) -> Int {
    let result = a.withContiguousStorageIfAvailable { left in
        b.withContiguousStorageIfAvailable { right in
            compareBytes(UnsafeRawBufferPointer(left), UnsafeRawBufferPointer(right))
        }
    }
    if let order = result ?? nil { return order }
    return compareBytes(Array(a), Array(b))
}

/// Two arrays' bytes, as the generic form orders them, without its two look-ups for storage.
func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
    a.withUnsafeBytes { left in b.withUnsafeBytes { right in compareBytes(left, right) } }
}

func compareBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
    let common = min(a.count, b.count)
    if common > 0 {
        let order = memcmp(a.baseAddress!, b.baseAddress!, common)
        if order != 0 { return order < 0 ? -1 : 1 }
    }
    return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
}

extension Array where Element == UInt8 {
    @inline(__always)
    func loadLittleEndian<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        withUnsafeBytes { $0.loadLittleEndian(T.self, at: offset) }
    }

    @inline(__always)
    mutating func storeLittleEndian<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        precondition(offset >= 0 && offset <= count &- MemoryLayout<T>.size)
        withUnsafeMutableBytes { $0.storeBytes(of: value.littleEndian, toByteOffset: offset, as: T.self) }
    }

    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }
}
