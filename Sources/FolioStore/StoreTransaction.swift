import LMDB

/// A transaction as the store's parts use it: the LMDB transaction, and in a write, the tree nodes
/// changed so far. Trees read and write their nodes through it; everything else goes to LMDB directly.
struct StoreTransaction {
    let lmdb: Transaction
    let trees: Database
    /// Nil in read snapshots: nodes come straight from LMDB.
    let cache: TreeNodeCache?
    /// The catalog as this write transaction last read it; nil in read snapshots.
    let catalogMemo: CatalogMemo?
    /// The store's resolutions of buffered trees (`ViewBuffer`), shared by its read snapshots.
    let deltas: ViewDeltaCache?
    /// Where buffered trees' ops go (`ViewBuffer`); nil where no tree is buffered.
    let viewOps: ViewStreamDatabases?
    /// A read snapshot's reader's memo of what earlier snapshots of the same state read; nil in
    /// writes.
    let readMemo: ReadMemo?

    init(
        lmdb: Transaction, trees: Database, cache: TreeNodeCache?, deltas: ViewDeltaCache? = nil,
        viewOps: ViewStreamDatabases? = nil,
        readMemo: ReadMemo? = nil
    ) {
        self.lmdb = lmdb
        self.trees = trees
        self.cache = cache
        self.deltas = deltas
        self.viewOps = viewOps
        catalogMemo = cache == nil ? nil : CatalogMemo()
        self.readMemo = cache == nil ? readMemo : nil
    }

    private init(
        lmdb: Transaction, trees: Database, cache: TreeNodeCache?, catalogMemo: CatalogMemo?, deltas: ViewDeltaCache?,
        viewOps: ViewStreamDatabases?
    ) {
        self.lmdb = lmdb
        self.trees = trees
        self.cache = cache
        self.catalogMemo = catalogMemo
        self.deltas = deltas
        self.viewOps = viewOps
        readMemo = nil
    }

    /// The resolution of `tree`'s ops that this transaction can build on: its write's own (or a
    /// parent write's), else the store's latest, if of the ops from `since` and at most `nextOp` ops.
    func bufferBase(tree: UInt32, since: UInt64, nextOp: UInt64) -> BufferedDelta? {
        func usable(_ delta: BufferedDelta?) -> BufferedDelta? {
            guard let delta, delta.since == since, delta.nextOp <= nextOp else { return nil }
            return delta
        }
        let own = usable(cache?.bufferMemo(tree: tree))
        let shared = usable(deltas?.lookup(tree))
        guard let own else { return shared }
        guard let shared else { return own }
        return shared.nextOp > own.nextOp ? shared : own
    }

    /// Keeps a resolution for the next lookups: a write's in its cache (its ops may not commit), a
    /// snapshot's in the store's.
    /// Keeps a merge round's ops for its next turns: a write's in its cache, for the store once it
    /// commits (its ops may not); a transaction without a cache keeps nothing.
    func keepRoundOps(_ ops: ViewBuffer.RoundOps?) { cache?.setRoundOps(ops) }

    func keepBuffer(_ delta: BufferedDelta, tree: UInt32) {
        if let cache { cache.setBufferMemo(delta, tree: tree) } else { deltas?.install(delta, tree: tree) }
    }

    func treeRecord(_ key: TreeNodeCache.NodeKey) throws -> [UInt8]? {
        if let cached = cache?.lookup(key) { return cached }
        if cache == nil, let readMemo {
            return try readMemo.treeRecord(key) { try storedTreeRecord(key) }
        }
        guard let cache, key.node == CountedTree.headerNode else { return try storedTreeRecord(key) }
        // A header: every insert into a view's tree reads it (five times a create into five views).
        if let read = cache.readHeader(tree: key.tree) { return read }
        let bytes = try storedTreeRecord(key)
        cache.noteReadHeader(bytes, tree: key.tree)
        return bytes
    }

    /// A tree's record as LMDB holds it, checked (`CountedTree.problem(in:node:)`): what the caches
    /// hold came from here or from the trees' own edits, so nothing reads a damaged record.
    private func storedTreeRecord(_ key: TreeNodeCache.NodeKey) throws -> [UInt8]? {
        try key.withBytes { keyBytes in
            guard let raw = try lmdb.get(trees, keyBytes) else { return nil }
            if let problem = CountedTree.problem(in: raw, node: key.node) {
                throw StoreError.corrupted(
                    "tree \(key.tree): \(key.node == CountedTree.headerNode ? "its header" : "node \(key.node)") is damaged: \(problem)"
                )
            }
            return Array(raw)
        }
    }

    /// A tree's record where LMDB holds it, for a read snapshot (no `cache`: nothing changed sits
    /// elsewhere), valid until the transaction ends (in a write that writes through, as tests
    /// make, until it next writes): a leaf a page reads once is neither copied nor kept. Nil if
    /// absent.
    func treeRecordInPlace(_ key: TreeNodeCache.NodeKey) throws -> UnsafeRawBufferPointer? {
        precondition(cache == nil, "a write's tree nodes may be changed in its cache")
        return try key.withBytes { try lmdb.get(trees, $0) }
    }

    /// A record about to be changed and stored again: taken out of a top-level cache, so that it is
    /// uniquely held and changes in place instead of being copied.
    func takeTreeRecord(_ key: TreeNodeCache.NodeKey) throws -> [UInt8]? {
        if let taken = cache?.take(key) { return taken }
        return try treeRecord(key)
    }

    /// As `takeTreeRecord`, and whether the record was taken out of the cache: such a record must
    /// be stored again even if unchanged, while one read from LMDB (or a parent cache) need not be.
    func takeTreeRecordNotingCache(_ key: TreeNodeCache.NodeKey) throws -> (bytes: [UInt8], taken: Bool)? {
        if let taken = cache?.take(key) { return (taken, true) }
        return try treeRecord(key).map { ($0, false) }
    }

    func setTreeRecord(_ key: TreeNodeCache.NodeKey, _ bytes: [UInt8]) throws {
        if let cache { cache.set(key, bytes) } else { try lmdb.put(trees, key.bytes, bytes) }
    }

    func removeTreeRecord(_ key: TreeNodeCache.NodeKey) throws {
        if let cache { cache.set(key, nil) } else { try lmdb.delete(trees, key.bytes) }
    }

    /// Every node id the tree has, stored or cached.
    func treeNodes(_ tree: UInt32) throws -> Set<UInt64> {
        var nodes = Set<UInt64>()
        let prefix = TreeNodeCache.NodeKey(tree: tree, node: 0).bytes.prefix(4)
        try lmdb.withCursor(trees) { cursor in
            var entry = try cursor.seek(atLeast: Array(prefix))
            while let (key, _) = entry, key.starts(with: prefix) {
                nodes.insert(UInt64(bigEndian: key.loadUnaligned(fromByteOffset: 4, as: UInt64.self)))
                entry = try cursor.next()
            }
        }
        cache?.adjust(&nodes, tree: tree)
        return nodes
    }

    /// A child for a nested LMDB transaction, with a cache layered over this one's. The keys this
    /// one held back must be in their trees first (`applyHeldAppends`, before the nested LMDB
    /// transaction begins: LMDB refuses reads through a transaction with a child): a nested cache
    /// holds none back, and must find them; and its view ops in LMDB (`ViewBuffer.flushOps`).
    /// `nestedWrite` does both.
    func nested(_ child: Transaction) -> StoreTransaction {
        precondition(cache?.holdsNoAppends ?? true, "keys held back when a nested transaction began")
        precondition(cache?.holdsNoOps ?? true, "view ops held when a nested transaction began")
        return StoreTransaction(
            lmdb: child, trees: trees, cache: TreeNodeCache(parent: cache), catalogMemo: catalogMemo, deltas: deltas,
            viewOps: viewOps)
    }

    /// Runs `body` in a write nested in this one, whose changes join this one's only if it
    /// returns: what this write holds back goes into LMDB first (LMDB takes nothing through a
    /// transaction with a child), and the nested write's view ops into its LMDB transaction before
    /// it commits.
    @discardableResult
    func nestedWrite<R>(_ body: (StoreTransaction) throws -> R) throws -> R {
        try applyHeldAppends()
        try ViewBuffer.flushOps(self)
        return try lmdb.nested { child in
            let nested = nested(child)
            let result = try body(nested)
            try ViewBuffer.flushOps(nested)
            nested.cache?.mergeIntoParent()
            return result
        }
    }

    /// Puts the keys held back for appending (see `CountedTree.insert`) into their trees.
    func applyHeldAppends() throws {
        guard let cache else { return }
        for tree in cache.treesWithAppends { try CountedTree(id: tree).applyHeldAppends(self) }
        cache.forgetLastKeys()
    }

    /// Writes the tree nodes changed in this write to LMDB, and the view op stream's state: once,
    /// just before the commit.
    func flushTrees() throws {
        try applyHeldAppends()
        try ViewBuffer.flushOps(self)
        try cache?.flush(into: lmdb, trees: trees)
        if let state = cache?.takeChangedBufferState() {
            guard let viewOps else {
                preconditionFailure("a view op stream's state in a transaction without the view ops' database")
            }
            try lmdb.put(viewOps.main, ViewBuffer.stateKey, state.bytes)
        }
    }
}

/// Tree records changed in a write transaction, held in memory and written to LMDB once, just before
/// the transaction commits: a run of inserts at the same place (a batch of creates in creation order)
/// rewrites each node once per commit instead of once per insert. A cache for a nested transaction
/// sits over its parent's and is merged into it when the nested transaction commits, dropped when
/// it aborts, so the cache always agrees with LMDB's view of the transaction.
final class TreeNodeCache {
    struct NodeKey: Hashable {
        let tree: UInt32
        let node: UInt64

        var bytes: [UInt8] {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(12)
            withUnsafeBytes(of: tree.bigEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: node.bigEndian) { bytes.append(contentsOf: $0) }
            return bytes
        }

        /// `bytes` without an array: the 12 bytes on the stack, for a lookup.
        func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
            var raw = (
                tree.bigEndian, UInt32(truncatingIfNeeded: node >> 32).bigEndian,
                UInt32(truncatingIfNeeded: node).bigEndian
            )
            return try withUnsafeBytes(of: &raw) { try body($0) }
        }
    }

    private let parent: TreeNodeCache?
    private var records = NodeTable()
    /// Resolutions of buffered trees' ops as this write (or its parent) last worked them out.
    private var bufferMemos: [UInt32: BufferedDelta] = [:]
    /// Tree headers as LMDB holds them, read in this write (top level only; nil: none stored).
    /// LMDB's trees change only when the write ends (`flush`): until then a header's changes are
    /// in `records`, which lookups consult first.
    private var readHeaders: [UInt32: [UInt8]?] = [:]
    /// The view op stream's state as this write last read or changed it (`ViewBuffer.state`), and
    /// whether it changed: a write into five views read, decoded, encoded and stored it five times
    /// a create; now once a write, stored by `StoreTransaction.flushTrees`.
    private var bufferState: (state: BufferState, changed: Bool)?
    /// A merge round's ops this write read for its turns (`ViewBuffer.roundOps`), or `.some(nil)`
    /// when it ended the round: nil when it did neither.
    private var roundOps: ViewBuffer.RoundOps??
    /// The view ops appended at this level of the write and not yet in LMDB, as one record's value,
    /// and the first one's number (`ViewBuffer.append`).
    private var opsFirst: UInt64 = 0
    private var opsCount: UInt64 = 0
    private var opsBytes: [UInt8] = []
    /// Per tree, its last key as this write last put it in at the tree's end, and the keys held back
    /// since to be appended after it (see `CountedTree.insert`), ascending; top level only. A few
    /// trees at a time, in three arrays so that finding a tree reads only the first (every tree
    /// insert asks).
    private var appendTrees: [UInt32] = []
    private var appendLast: [[UInt8]] = []
    private var appendKeys: [[[UInt8]]] = []

    init(parent: TreeNodeCache?) { self.parent = parent }

    var count: Int { records.count }

    /// `.some(nil)` when removed, nil when this cache (and its parents) do not know the record.
    func lookup(_ key: NodeKey) -> [UInt8]?? {
        if let entry = records[key] { return .some(entry) }
        return parent?.lookup(key)
    }

    func set(_ key: NodeKey, _ bytes: [UInt8]?) { records.set(key, bytes) }

    /// Removes and returns a record held by this cache (top level only; a nested cache's parent keeps
    /// its copy). The caller must store it again.
    func take(_ key: NodeKey) -> [UInt8]? {
        guard parent == nil else { return nil }
        return records.take(key)
    }

    /// Adds the tree's nodes created in memory and takes out those removed.
    func adjust(_ nodes: inout Set<UInt64>, tree: UInt32) {
        parent?.adjust(&nodes, tree: tree)
        records.forEach { key, bytes in
            guard key.tree == tree else { return }
            if bytes == nil { nodes.remove(key.node) } else { nodes.insert(key.node) }
        }
    }

    /// The nested transaction committed: its changes become the parent's.
    func mergeIntoParent() {
        guard let parent else { return }
        precondition(holdsNoOps, "a nested write's view ops go into its LMDB transaction before it commits")
        records.forEach { key, bytes in parent.records.set(key, bytes) }
        for (tree, memo) in bufferMemos { parent.bufferMemos[tree] = memo }
        if let bufferState { parent.setBufferState(bufferState.state, changed: bufferState.changed) }
        if let roundOps { parent.roundOps = roundOps }
    }

    /// Holds op `number` for the record of this level's ops; false if it does not follow them.
    func appendOp(_ number: UInt64, tree: UInt32, insert: Bool, key: [UInt8]) -> Bool {
        if opsCount == 0 {
            opsFirst = number
        } else if number != opsFirst + opsCount {
            return false
        }
        opsCount += 1
        ViewBuffer.appendOp(tree: tree, insert: insert, key: key, to: &opsBytes)
        return true
    }

    /// The ops held, for LMDB; forgets them.
    func takeOps() -> (first: UInt64, bytes: [UInt8])? {
        guard opsCount > 0 else { return nil }
        defer { dropOps() }
        return (opsFirst, opsBytes)
    }

    func dropOps() {
        opsCount = 0
        opsBytes.removeAll(keepingCapacity: true)
    }

    var holdsNoOps: Bool { opsCount == 0 }

    /// The round's ops this write (or its parent) read, if any, and not dropped.
    func keptRoundOps() -> ViewBuffer.RoundOps? {
        if let roundOps { return roundOps }
        return parent?.keptRoundOps()
    }

    func setRoundOps(_ ops: ViewBuffer.RoundOps?) { roundOps = .some(ops) }

    /// What this write did to the round's ops, for the store once it commits (top level).
    var roundOpsChange: ViewBuffer.RoundOps?? { roundOps }

    func bufferMemo(tree: UInt32) -> BufferedDelta? { bufferMemos[tree] ?? parent?.bufferMemo(tree: tree) }

    /// `tree`'s header as LMDB holds it, if this write read it: `.some(nil)` when LMDB has none.
    func readHeader(tree: UInt32) -> [UInt8]?? {
        if let parent { return parent.readHeader(tree: tree) }
        return readHeaders[tree]
    }

    func noteReadHeader(_ bytes: [UInt8]?, tree: UInt32) {
        if let parent { return parent.noteReadHeader(bytes, tree: tree) }
        readHeaders[tree] = bytes
    }

    /// The stream's state as this write (or its parent) knows it; nil when it has not read it.
    func knownBufferState() -> BufferState? { bufferState?.state ?? parent?.knownBufferState() }

    /// Whether the state this write (or its parent) holds counts `tree`, whose ops are then pending
    /// (only a buffered tree has them); false when it holds none. A look, without copying the state.
    func bufferStateCounts(tree: UInt32) -> Bool {
        if let bufferState { return bufferState.state.count(of: tree) != nil }
        return parent?.bufferStateCounts(tree: tree) ?? false
    }

    /// The state as read from LMDB (`changed` false) or as changed by this write.
    func setBufferState(_ state: BufferState, changed: Bool) {
        bufferState = (state, changed || bufferState?.changed == true)
    }

    /// Whether this cache (not a parent) holds the state.
    var holdsOwnBufferState: Bool { bufferState != nil }

    /// Changes the state this cache holds in place (the caller checked `holdsOwnBufferState`).
    func changeOwnBufferState<R>(_ body: (inout BufferState) throws -> R) rethrows -> R {
        bufferState!.changed = true
        return try body(&bufferState!.state)
    }

    /// The changed state, for LMDB (top level only); forgets it.
    func takeChangedBufferState() -> BufferState? {
        precondition(parent == nil, "a nested write's view op state is its parent's once it commits")
        defer { bufferState = nil }
        return bufferState?.changed == true ? bufferState?.state : nil
    }

    func setBufferMemo(_ delta: BufferedDelta, tree: UInt32) { bufferMemos[tree] = delta }

    /// This write's resolutions, for the store's snapshots once it commits (top level: a nested
    /// write's are its parent's once it commits).
    var bufferMemoList: [(tree: UInt32, delta: BufferedDelta)] { bufferMemos.map { ($0.key, $0.value) } }

    /// The last key of `tree` as far as this write knows: held back, or put in at the end; nil when
    /// unknown, and always in a nested cache, which holds nothing back.
    func lastKey(tree: UInt32) -> [UInt8]? {
        guard !appendTrees.isEmpty, let index = appendTrees.firstIndex(of: tree) else { return nil }
        return appendLast[index]
    }

    /// `key` went in at the end of `tree`: the next larger key may be held back.
    func noteLastKey(_ key: [UInt8], tree: UInt32) {
        guard parent == nil else { return }
        if let index = appendTrees.firstIndex(of: tree) {
            appendLast[index] = key
        } else {
            appendTrees.append(tree)
            appendLast.append(key)
            appendKeys.append([])
        }
    }

    /// Holds back `key`, which sorts after `lastKey(tree:)`.
    func hold(_ key: [UInt8], tree: UInt32) {
        guard let index = appendTrees.firstIndex(of: tree) else { preconditionFailure("no last key of tree \(tree)") }
        appendLast[index] = key
        appendKeys[index].append(key)
    }

    /// The keys held back for `tree` (nil when none), which the caller puts in; forgets its last key.
    func takeAppends(tree: UInt32) -> [[UInt8]]? {
        guard !appendTrees.isEmpty, let index = appendTrees.firstIndex(of: tree) else { return nil }
        appendTrees.remove(at: index)
        appendLast.remove(at: index)
        let keys = appendKeys.remove(at: index)
        return keys.isEmpty ? nil : keys
    }

    /// Whether no key is held back and no tree's last key known.
    var holdsNoAppends: Bool { appendTrees.isEmpty }

    /// Trees with keys held back.
    var treesWithAppends: [UInt32] { appendTrees.indices.filter { !appendKeys[$0].isEmpty }.map { appendTrees[$0] } }

    /// Forgets every last key (nothing may be held back).
    func forgetLastKeys() {
        precondition(appendKeys.allSatisfy(\.isEmpty))
        appendTrees.removeAll()
        appendLast.removeAll()
        appendKeys.removeAll()
    }

    /// Writes every change to LMDB and forgets it. Top level only.
    func flush(into txn: Transaction, trees: Database) throws {
        precondition(
            parent == nil && appendTrees.isEmpty,
            "tree nodes flushed with keys held back: use StoreTransaction.flushTrees")
        try records.forEach { key, bytes in
            if let bytes { try txn.put(trees, key.bytes, bytes) } else { try txn.delete(trees, key.bytes) }
        }
        records.removeAll()
        readHeaders.removeAll()
    }
}

/// The records of a `TreeNodeCache`: an open-addressing table probed linearly and hashed by
/// multiplication. A Swift dictionary hashed each node key with SipHash, four to six times per
/// tree insert (lookups, takes, stores), 15% of a create into five views; node keys are the store's
/// own numbers, nothing a client chooses, so a keyed hash buys nothing here. A slot, once used,
/// keeps its key until `removeAll`: a taken record leaves it `taken` (absent to lookups, as if
/// removed from a dictionary) and is stored back in the same slot, so there are no tombstones.
struct NodeTable {
    private enum State: UInt8 {
        case empty
        /// Holds a record (`values[slot]`; nil: removed in this transaction).
        case present
        /// Taken out to be changed; absent until stored again.
        case taken
    }

    private var states: [State] = []
    private var keys: [TreeNodeCache.NodeKey] = []
    private var values: [[UInt8]?] = []
    /// Slots not empty, and of them those present.
    private var used = 0
    private(set) var count = 0

    private static func hash(_ key: TreeNodeCache.NodeKey) -> Int {
        let mixed = (key.node ^ (UInt64(key.tree) &<< 40)) &* 0x9E37_79B9_7F4A_7C15
        return Int(truncatingIfNeeded: mixed ^ (mixed >> 29))
    }

    /// The slot holding `key`, or the empty slot where it would go.
    private func slot(of key: TreeNodeCache.NodeKey) -> (index: Int, found: Bool) {
        let mask = states.count - 1
        var index = Self.hash(key) & mask
        while true {
            switch states[index] {
            case .empty: return (index, false)
            case .present, .taken: if keys[index] == key { return (index, true) }
            }
            index = (index + 1) & mask
        }
    }

    subscript(key: TreeNodeCache.NodeKey) -> [UInt8]?? {
        guard count > 0 else { return nil }
        let (index, found) = slot(of: key)
        guard found, states[index] == .present else { return nil }
        return .some(values[index])
    }

    mutating func set(_ key: TreeNodeCache.NodeKey, _ bytes: [UInt8]?) {
        if (used + 1) * 2 > states.count { grow() }
        let (index, found) = slot(of: key)
        if !found {
            keys[index] = key
            used += 1
        }
        if states[index] != .present { count += 1 }
        states[index] = .present
        values[index] = bytes
    }

    /// The record's bytes, moved out (so that the caller holds them alone and changes them in
    /// place); nil if the table holds none (absent, taken, or removed).
    mutating func take(_ key: TreeNodeCache.NodeKey) -> [UInt8]? {
        guard count > 0 else { return nil }
        let (index, found) = slot(of: key)
        guard found, states[index] == .present, values[index] != nil else { return nil }
        states[index] = .taken
        count -= 1
        return values[index].take()
    }

    /// Every present record, in slot order.
    func forEach(_ body: (TreeNodeCache.NodeKey, [UInt8]?) throws -> Void) rethrows {
        for index in states.indices where states[index] == .present { try body(keys[index], values[index]) }
    }

    mutating func removeAll() {
        guard used > 0 else { return }
        for index in states.indices where states[index] != .empty {
            states[index] = .empty
            values[index] = nil
        }
        used = 0
        count = 0
    }

    private mutating func grow() {
        let old = (states, keys, values)
        let capacity = max(64, states.count * 2)
        states = [State](repeating: .empty, count: capacity)
        keys = [TreeNodeCache.NodeKey](repeating: TreeNodeCache.NodeKey(tree: 0, node: 0), count: capacity)
        values = [[UInt8]?](repeating: nil, count: capacity)
        used = 0
        count = 0
        for index in old.0.indices where old.0[index] == .present {
            let (slot, _) = slot(of: old.1[index])
            states[slot] = .present
            keys[slot] = old.1[index]
            values[slot] = old.2[index]
            used += 1
            count += 1
        }
    }
}
