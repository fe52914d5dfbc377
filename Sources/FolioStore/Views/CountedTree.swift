import LMDB

/// An order-statistic B+tree of byte-string keys, stored as records of one LMDB database.
///
/// LMDB has no rank lookup, so views keep their entries here: each branch entry carries the number
/// of keys below it, which makes `count` O(1), and finding the key at any rank, or the rank of any
/// key, O(log n). Leaves are linked both ways, so a page is read by walking from one position.
///
/// A branch stores the count of every child but its last as 0: the last child holds what the
/// branch holds (its parent's count for it, the header's for the root) less what the others hold.
/// So a key added or removed under a branch's last child leaves that branch's record as it was,
/// and an append (the creation-order tree's new ids, a view sorted by a growing field), which goes
/// down the right edge, rewrites only its leaf and the header: one LMDB page or two a commit
/// instead of one per level (docs/BENCHMARKS.md, "What a durable create writes"). A branch about
/// to split or to lose a child has its last count filled in (`fillLastCount`); `store` zeroes it.
///
/// A view's tree is *buffered*: its inserts and removals are appended as op records to a stream
/// shared by every view (the `viewops` database) and merged into the nodes `ViewBuffer.limit` at a
/// time, in key order, so that a commit rewrites the page at the stream's end instead of a leaf and
/// its branches per insert; every read sees the ops as if merged (`BufferedDelta`: the ops key by
/// key, with each change's rank in the nodes), and between merges the nodes do not change.
/// Collections' and references' trees are not buffered.
///
/// Records of the `trees` database: key = tree id (u32 big-endian) + node id (u64 big-endian),
/// read and written through `StoreTransaction` (which caches them in a write); node `UInt64.max` is
/// the header (root id, height, next node id, key count in the nodes, and whether it is buffered).
/// Every change happens in the caller's write transaction and is a pure function of the tree and
/// the call, so replaying the same calls yields the same bytes.
struct CountedTree {
    static let maxNodeBytes = 1900
    /// Longest key a tree accepts, so that every node holds at least two entries.
    static let maxKeyBytes = 512

    let id: UInt32

    /// A place between two keys: in the nodes (`leaf`, `index`), and in a buffered tree's
    /// pending changes (`change`: the first change after the place, in `changes`).
    struct Position: Equatable {
        var leaf: UInt64
        var index: Int
        var change = 0
        var changes: BufferedDelta?

        init(leaf: UInt64, index: Int, change: Int = 0, changes: BufferedDelta? = nil) {
            self.leaf = leaf
            self.index = index
            self.change = change
            self.changes = changes
        }

        static func == (left: Position, right: Position) -> Bool {
            left.leaf == right.leaf && left.index == right.index && left.change == right.change
                && left.changes === right.changes
        }
    }

    fileprivate struct Header {
        var root: UInt64
        /// Branch levels above the leaves: 0 when the root is a leaf.
        var height: Int
        var nextNode: UInt64
        /// The keys in the tree's nodes.
        var count: UInt64
        /// A buffered tree (a view's) takes its changes as ops, merged into its nodes many at a
        /// time (`ViewBuffer`); its header is 40 bytes (the last 8 flags), an unbuffered tree's 32.
        var buffered = false

        /// Written once per change of the tree: one allocation of the final size.
        var bytes: [UInt8] {
            let size = buffered ? 40 : 32
            return [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
                let raw = UnsafeMutableRawBufferPointer(buffer)
                raw.storeBytes(of: root.littleEndian, toByteOffset: 0, as: UInt64.self)
                raw.storeBytes(of: UInt64(height).littleEndian, toByteOffset: 8, as: UInt64.self)
                raw.storeBytes(of: nextNode.littleEndian, toByteOffset: 16, as: UInt64.self)
                raw.storeBytes(of: count.littleEndian, toByteOffset: 24, as: UInt64.self)
                if buffered { raw.storeBytes(of: UInt64(1).littleEndian, toByteOffset: 32, as: UInt64.self) }
                initialized = size
            }
        }

        init(root: UInt64, height: Int, nextNode: UInt64, count: UInt64, buffered: Bool = false) {
            self.root = root
            self.height = height
            self.nextNode = nextNode
            self.count = count
            self.buffered = buffered
        }

        /// What is wrong with `raw` as a stored header, or nil: 32 or 40 bytes, a height a tree
        /// of 2^64 keys could have (checked with the nodes, `TreeNode.problem(in:)`).
        static func problem(in raw: UnsafeRawBufferPointer) -> String? {
            guard raw.count == 32 || raw.count == 40 else { return "a header of \(raw.count) bytes" }
            let height = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            guard height <= 64 else { return "a header of height \(height)" }
            return nil
        }

        init(_ bytes: [UInt8]) {
            root = bytes.loadLittleEndian(UInt64.self, at: 0)
            height = Int(bytes.loadLittleEndian(UInt64.self, at: 8))
            nextNode = bytes.loadLittleEndian(UInt64.self, at: 16)
            count = bytes.loadLittleEndian(UInt64.self, at: 24)
            buffered = bytes.count >= 40 && bytes.loadLittleEndian(UInt64.self, at: 32) & 1 != 0
        }
    }

    // MARK: Records

    /// The header's record: after every node's, beside the newest nodes (an append's leaf, the
    /// last to be made), so that the two records an append rewrites tend to share an LMDB page.
    static let headerNode = UInt64.max

    /// What is wrong with `raw` as the record of `node` (a header or a node), or nil.
    static func problem(in raw: UnsafeRawBufferPointer, node: UInt64) -> String? {
        node == headerNode ? Header.problem(in: raw) : TreeNode.problem(in: raw)
    }

    private func recordKey(_ node: UInt64) -> TreeNodeCache.NodeKey {
        TreeNodeCache.NodeKey(tree: id, node: node)
    }

    /// The header, after any keys this write holds back for the tree (see `insert`): every
    /// operation but `insert`'s shortcut starts here, so each sees them, and the write forgets the
    /// tree's last key (a removal may have taken it).
    private func header(_ txn: StoreTransaction) throws -> Header {
        if let keys = txn.cache?.takeAppends(tree: id) { try applyAppends(keys, txn) }
        return try storedHeader(txn)
    }

    private func storedHeader(_ txn: StoreTransaction) throws -> Header {
        guard let bytes = try txn.treeRecord(recordKey(Self.headerNode)) else {
            throw StoreError.corrupted("tree \(id) has no header")
        }
        return Header(bytes)
    }

    /// A leaf that will be changed and stored again (see `StoreTransaction.takeTreeRecord`).
    private func take(_ node: UInt64, _ txn: StoreTransaction) throws -> TreeNode {
        guard let bytes = try txn.takeTreeRecord(recordKey(node)) else {
            throw StoreError.corrupted("tree \(id) lacks node \(node)")
        }
        let taken = TreeNode(bytes: bytes)
        guard taken.isLeaf else {
            throw StoreError.corrupted("tree \(id): node \(node) is a branch where a leaf should be")
        }
        return taken
    }

    private func store(_ header: Header, _ txn: StoreTransaction) throws {
        try txn.setTreeRecord(recordKey(Self.headerNode), header.bytes)
    }

    func load(_ node: UInt64, _ txn: StoreTransaction) throws -> TreeNode {
        guard let bytes = try txn.treeRecord(recordKey(node)) else {
            throw StoreError.corrupted("tree \(id) lacks node \(node)")
        }
        return TreeNode(bytes: bytes)
    }

    /// A node a descent passes through above the leaves, which must be a branch.
    private func loadBranch(_ node: UInt64, _ txn: StoreTransaction) throws -> TreeNode {
        let loaded = try load(node, txn)
        guard !loaded.isLeaf else {
            throw StoreError.corrupted("tree \(id): node \(node) is a leaf where a branch should be")
        }
        return loaded
    }

    /// Stores `node`, a branch with its last count zeroed (in place: the caller is done with it).
    private func store(_ node: inout TreeNode, as nodeID: UInt64, _ txn: StoreTransaction) throws {
        if !node.isLeaf && node.count > 0 { node.setChildCount(node.count - 1, 0) }
        try txn.setTreeRecord(recordKey(nodeID), node.bytes)
    }

    /// Fills in a branch's last count, which is stored as 0, from `total`, what the branch holds.
    private static func fillLastCount(_ node: inout TreeNode, total: UInt64) {
        guard !node.isLeaf, node.count > 0 else { return }
        node.setChildCount(node.count - 1, total &- keys(before: node.count - 1, in: node))
    }

    /// A branch that may be changed, and whether it was taken out of the write's cache (then it
    /// must be stored again, changed or not).
    private func takeBranch(_ node: UInt64, _ txn: StoreTransaction) throws -> (node: TreeNode, taken: Bool) {
        guard let (bytes, taken) = try txn.takeTreeRecordNotingCache(recordKey(node)) else {
            throw StoreError.corrupted("tree \(id) lacks node \(node)")
        }
        let branch = TreeNode(bytes: bytes)
        guard !branch.isLeaf else {
            throw StoreError.corrupted("tree \(id): node \(node) is a leaf where a branch should be")
        }
        return (branch, taken)
    }

    /// A node read for a change that is stored only if it changes: its last count filled in.
    private func loadFilled(_ node: UInt64, total: UInt64, _ txn: StoreTransaction) throws -> TreeNode {
        var loaded = try load(node, txn)
        Self.fillLastCount(&loaded, total: total)
        return loaded
    }

    // MARK: Life cycle

    /// Writes an empty tree; a `buffered` one takes its changes as ops (`ViewBuffer`).
    static func create(id: UInt32, buffered: Bool = false, _ txn: StoreTransaction) throws -> CountedTree {
        let tree = CountedTree(id: id)
        try tree.store(Header(root: 1, height: 0, nextNode: 2, count: 0, buffered: buffered), txn)
        var root = TreeNode.leaf(previous: 0, next: 0, keys: [[UInt8]]())
        try tree.store(&root, as: 1, txn)
        return tree
    }

    /// Deletes every record of the tree.
    func destroy(_ txn: StoreTransaction) throws {
        _ = txn.cache?.takeAppends(tree: id)
        txn.deltas?.forget(id)
        // A buffered tree's ops stay in the stream until it is emptied (a round's end puts back only
        // the ops after it); merges skip them.
        if let bytes = try txn.treeRecord(recordKey(Self.headerNode)), Header(bytes).buffered {
            var state = try ViewBuffer.state(txn)
            if state.count(of: id) != nil {
                state.setCount(nil, of: id)
                try ViewBuffer.store(state, txn)
            }
        }
        for node in try txn.treeNodes(id) { try txn.removeTreeRecord(recordKey(node)) }
    }

    func count(_ txn: StoreTransaction) throws -> Int {
        let header = try header(txn)
        guard header.buffered else { return Int(header.count) }
        return Int(try ViewBuffer.state(txn).count(of: id) ?? header.count)
    }

    /// The keys in the nodes, without the ops not yet merged (for tests).
    func nodeCount(_ txn: StoreTransaction) throws -> Int { Int(try header(txn).count) }

    /// The tree's header as read once, for the descents of one read (a page's count and its first
    /// position): each descent would otherwise read it again; with the ops not yet merged, as
    /// resolved for this state. Valid while the tree does not change.
    struct Top {
        fileprivate let header: Header
        let delta: BufferedDelta?
        var count: Int { Int(header.count) + (delta?.netChange ?? 0) }
    }

    func top(_ txn: StoreTransaction) throws -> Top {
        let header = try header(txn)
        return Top(header: header, delta: try resolved(header, txn))
    }

    /// Puts in the keys the write holds back for this tree (see `insert`).
    func applyHeldAppends(_ txn: StoreTransaction) throws { _ = try header(txn) }

    // MARK: Changes

    /// Adds `key`; returns false if it was already there.
    ///
    /// A key after every key of the tree (the creation-order tree's new ids, a view sorted by a
    /// growing field) is held back in the write's cache once the insert before it went in at the
    /// tree's end; the keys held back go in together when anything else asks the tree (its header)
    /// or the write ends (`StoreTransaction.flushTrees`): one pass down the right edge for the lot
    /// instead of one per key. The nodes come out byte for byte as if each key had gone in at once
    /// (`applyAppends` makes the same moves in the same order).
    ///
    /// A buffered tree takes the key as an op (it must not hold it), unless `direct` and none of
    /// its ops is pending (a view being filled as it is defined): then into its nodes at once.
    @discardableResult
    func insert(_ key: [UInt8], direct: Bool = false, _ txn: StoreTransaction) throws -> Bool {
        precondition(key.count <= Self.maxKeyBytes)
        if let cache = txn.cache {
            if let last = cache.lastKey(tree: id) {
                if compareBytes(last, key) < 0 {
                    cache.hold(key, tree: id)
                    return true
                }
            } else if cache.bufferStateCounts(tree: id) {
                // Ops pending: a buffered tree, whose header this op does not need.
                try buffer(insert: true, key, nil, txn)
                return true
            }
        }
        let header = try header(txn)
        if header.buffered {
            if try !direct || ViewBuffer.state(txn).count(of: id) != nil {
                try buffer(insert: true, key, header, txn)
                return true
            }
            if try !insertIntoNodes(key, header, txn) {
                throw StoreError.corrupted("tree \(id) already holds a key filled into it")
            }
            return true
        }
        return try insertIntoNodes(key, header, txn)
    }

    /// `insert` into the nodes, `header` as read (a buffered tree's merge and fill come here).
    private func insertIntoNodes(_ key: [UInt8], _ header: Header, _ txn: StoreTransaction) throws -> Bool {
        var header = header
        // Every node on the path changes if the key is new: take each on the way down, to change it
        // in place (one lookup per node, not two), and put them back as they were if it is not.
        var path = try descend(to: key, header, txn, taking: true)
        var leaf = try take(path.leafID, txn)
        let (index, found) = leaf.search(key)
        if found {
            try store(&leaf, as: path.leafID, txn)
            for depth in path.branches.indices where path.branches[depth].taken {
                try store(&path.branches[depth].node, as: path.branches[depth].id, txn)
            }
            return false
        }
        let atEnd = index == leaf.count && leaf.next == 0
        leaf.insert(key, at: index)
        path.addToCounts(1)
        header.count += 1
        try settle(leaf, &path, &header, txn)
        if atEnd { txn.cache?.noteLastKey(key, tree: id) }
        return true
    }

    /// Inserts `keys`, ascending and each after every key of the tree, as `insert` would one by one:
    /// down the right edge once, and again after each split.
    private func applyAppends(_ keys: [[UInt8]], _ txn: StoreTransaction) throws {
        guard let first = keys.first else { return }
        var header = try storedHeader(txn)
        var path = try descend(to: first, header, txn, taking: true)
        var leaf = try take(path.leafID, txn)
        for (number, key) in keys.enumerated() {
            leaf.insert(key, at: leaf.count)
            path.addToCounts(1)
            header.count += 1
            guard leaf.size > Self.maxNodeBytes, number + 1 < keys.count else { continue }
            try settle(leaf, &path, &header, txn)  // leaves `header` as it stored it
            path = try descend(to: keys[number + 1], header, txn, taking: true)
            leaf = try take(path.leafID, txn)
        }
        try settle(leaf, &path, &header, txn)
    }

    /// After `leaf` (taken, with every branch of `path`) gained a key: splits upwards while a node
    /// is too large, and stores the leaf, the branches and the header.
    private func settle(_ leaf: TreeNode, _ path: inout Path, _ header: inout Header, _ txn: StoreTransaction) throws {
        var leaf = leaf
        // Split upwards while a node is too large. `level` is the depth of `node` (leaves are deepest).
        var node = leaf
        var nodeID = path.leafID
        var level = path.branches.count
        while node.size > Self.maxNodeBytes {
            var right = node.splitOff()
            let rightID = header.nextNode
            header.nextNode += 1
            let fence: [UInt8]
            if node.isLeaf {
                right.previous = nodeID
                right.next = node.next
                if node.next != 0 {
                    var following = try load(node.next, txn)
                    following.previous = rightID
                    try store(&following, as: node.next, txn)
                }
                node.next = rightID
                fence = Self.separator(after: node.entry(node.count - 1), before: right.entry(0))
            } else {
                fence = Array(right.fence(0))
            }
            let leftCount = node.isLeaf ? UInt64(node.count) : node.totalCount
            let rightCount = right.isLeaf ? UInt64(right.count) : right.totalCount
            try store(&node, as: nodeID, txn)
            try store(&right, as: rightID, txn)
            if level == 0 {
                // The root split: a new root above both halves.
                let rootID = header.nextNode
                header.nextNode += 1
                var root = TreeNode.branch(children: [
                    TreeNode.child(nodeID, count: leftCount, fence: []),
                    TreeNode.child(rightID, count: rightCount, fence: fence),
                ])
                try store(&root, as: rootID, txn)
                header.root = rootID
                header.height += 1
                try store(header, txn)
                return
            }
            level -= 1
            let slot = path.branches[level].index
            path.branches[level].node.setChildCount(slot, leftCount)
            path.branches[level].node.insert(TreeNode.child(rightID, count: rightCount, fence: fence), at: slot + 1)
            path.branches[level].changed = true
            node = path.branches[level].node
            // Its halves' counts are what their children hold, the last one's too.
            Self.fillLastCount(&node, total: path.branches[level].total)
            nodeID = path.branches[level].id
        }
        if level == path.branches.count { try store(&leaf, as: path.leafID, txn) }
        // Branches above `level` may have changed (a count of a child not the last), the one at
        // `level` too (a new child); deeper ones were split and stored. One taken out of the
        // write's cache goes back, changed or not.
        for depth in path.branches.indices.prefix(level + 1)
        where path.branches[depth].changed || path.branches[depth].taken {
            try store(&path.branches[depth].node, as: path.branches[depth].id, txn)
        }
        try store(header, txn)
    }

    /// Removes `key`; returns false if it was not there.
    /// A buffered tree takes the removal as an op (it must hold the key).
    @discardableResult
    func remove(_ key: [UInt8], _ txn: StoreTransaction) throws -> Bool {
        if let cache = txn.cache, cache.lastKey(tree: id) == nil, cache.bufferStateCounts(tree: id) {
            try buffer(insert: false, key, nil, txn)
            return true
        }
        let header = try header(txn)
        if header.buffered {
            try buffer(insert: false, key, header, txn)
            return true
        }
        return try removeFromNodes(key, header, txn)
    }

    /// `remove` from the nodes, `header` as read.
    private func removeFromNodes(_ key: [UInt8], _ header: Header, _ txn: StoreTransaction) throws -> Bool {
        var header = header
        var path = try descend(to: key, header, txn)
        var leaf = try load(path.leafID, txn)
        let (index, found) = leaf.search(key)
        if !found { return false }
        leaf.remove(at: index)
        path.addToCounts(-1)
        header.count -= 1

        // From the leaf up: drop an empty node, merge a small one into a neighbour, else store it
        // if it changed (a branch changes when a child goes, or the count of a child not its last).
        var node = leaf
        var nodeID = path.leafID
        var changed = true
        for depth in stride(from: path.branches.count - 1, through: 0, by: -1) {
            var parent = path.branches[depth].node
            // Its children's counts, the last one's too: a merge adds two of them.
            Self.fillLastCount(&parent, total: path.branches[depth].total)
            let slot = path.branches[depth].index
            var parentChanged = path.branches[depth].changed
            if node.count == 0 {
                if node.isLeaf { try unlink(node, txn) }
                try txn.removeTreeRecord(recordKey(nodeID))
                parent.remove(at: slot)
                parentChanged = true
            } else if node.size < Self.maxNodeBytes / 4 && parent.count > 1 {
                let leftSlot = slot + 1 < parent.count ? slot : slot - 1
                let leftID = parent.childID(leftSlot)
                let rightID = parent.childID(leftSlot + 1)
                var left = leftSlot == slot ? node : try loadFilled(leftID, total: parent.childCount(leftSlot), txn)
                var right =
                    leftSlot == slot ? try loadFilled(rightID, total: parent.childCount(leftSlot + 1), txn) : node
                if left.size + right.size <= Self.maxNodeBytes * 3 / 4 {
                    if right.isLeaf {
                        try unlink(right, txn)
                        left.next = right.next
                    } else {
                        // The right node's first fence may be unset, or above keys routed to its first
                        // child: the parent's fence for it is below all of them.
                        right.replace(
                            at: 0,
                            with: TreeNode.child(
                                right.childID(0), count: right.childCount(0), fence: parent.fence(leftSlot + 1)))
                    }
                    left.append(contentsOf: right)
                    parent.setChildCount(leftSlot, parent.childCount(leftSlot) + parent.childCount(leftSlot + 1))
                    parent.remove(at: leftSlot + 1)
                    parentChanged = true
                    try txn.removeTreeRecord(recordKey(rightID))
                    try store(&left, as: leftID, txn)
                } else if changed {
                    try store(&node, as: nodeID, txn)
                }
            } else if changed {
                try store(&node, as: nodeID, txn)
            }
            node = parent
            nodeID = path.branches[depth].id
            changed = parentChanged
        }
        if changed { try store(&node, as: nodeID, txn) }

        // A root branch with a single child hands the root down.
        while header.height > 0 {
            let root = try loadBranch(header.root, txn)
            guard root.count <= 1 else { break }
            try txn.removeTreeRecord(recordKey(header.root))
            if root.count == 0 {
                header.root = header.nextNode
                header.nextNode += 1
                header.height = 0
                var leaf = TreeNode.leaf(previous: 0, next: 0, keys: [[UInt8]]())
                try store(&leaf, as: header.root, txn)
                break
            }
            header.root = root.childID(0)
            header.height -= 1
        }
        try store(header, txn)
        return true
    }

    /// Takes a leaf out of the chain of leaves.
    private func unlink(_ leaf: TreeNode, _ txn: StoreTransaction) throws {
        if leaf.previous != 0 {
            var previous = try load(leaf.previous, txn)
            previous.next = leaf.next
            try store(&previous, as: leaf.previous, txn)
        }
        if leaf.next != 0 {
            var next = try load(leaf.next, txn)
            next.previous = leaf.previous
            try store(&next, as: leaf.next, txn)
        }
    }

    /// The shortest prefix of `next` that still sorts after `last`: a fence needs no more.
    static func separator(after last: ArraySlice<UInt8>, before next: ArraySlice<UInt8>) -> [UInt8] {
        var common = 0
        let lastBytes = Array(last)
        let nextBytes = Array(next)
        while common < lastBytes.count && common < nextBytes.count && lastBytes[common] == nextBytes[common] {
            common += 1
        }
        return Array(nextBytes.prefix(common + 1))
    }

    // MARK: Buffered changes

    /// Appends an op to the stream. Once `ViewBuffer.limit` ops are pending, starts a merge round,
    /// whose first turn merges the first tree's ops; in a round, each `ViewBuffer.turnGap` ops
    /// take the next turn (see `ViewBuffer`). At the same ops whatever the commits, so that
    /// replaying the log gives the same nodes. `header` may be nil when the state counts the tree.
    private func buffer(insert: Bool, _ key: [UInt8], _ header: Header?, _ txn: StoreTransaction) throws {
        let (number, turn) = try ViewBuffer.update(txn) { state -> (UInt64, Bool) in
            guard let count = state.count(of: id) ?? header?.count else {
                preconditionFailure("tree \(id): an op without its count or header")
            }
            state.nextOp += 1
            state.setCount(insert ? count + 1 : count - 1, of: id)
            let turn: Bool
            if let round = state.round {
                turn = state.nextOp - round.end >= ViewBuffer.turnGap(trees: round.trees.count) * UInt64(round.turns)
            } else {
                turn = state.pending >= ViewBuffer.currentLimit
            }
            return (state.nextOp - 1, turn)
        }
        try ViewBuffer.append(number, tree: id, insert: insert, key: key, txn)
        guard turn else { return }
        var state = try ViewBuffer.state(txn)
        if state.round == nil {
            state.round = MergeRound(end: state.nextOp, trees: state.counts.map(\.tree), chunk: ViewBuffer.chunk)
        }
        try Self.mergeTurn(&state, txn)
    }

    /// The round's turn: its next tree (skipping dropped views) takes its ops before the round's
    /// end, a big tree a chunk of them; after the last tree, the stream keeps only the ops after the
    /// end. Stores `state`.
    private static func mergeTurn(_ state: inout BufferState, _ txn: StoreTransaction) throws {
        guard var round = state.round else { return try ViewBuffer.store(state, txn) }
        round.turns += 1
        while round.done < round.trees.count {
            let tree = CountedTree(id: round.trees[round.done])
            guard let header = try txn.treeRecord(tree.recordKey(headerNode)).map(Header.init) else {
                round.done += 1
                round.partial = nil
                continue
            }
            let since = round.partial ?? state.firstOp
            if round.chunk > 0, round.partial != nil || header.count >= ViewBuffer.bigTree {
                // A big tree: its next chunk, a leaf at a time.
                let (ops, next) = try ViewBuffer.ops(of: tree.id, in: since..<round.end, atMost: round.chunk, txn)
                try tree.takeChanges(BufferedDelta.netChanges(ops), rebuilding: nil, txn)
                if let next {
                    round.partial = next
                    break
                }
            } else {
                // The round's first pass keeps the ops of the trees that follow and take theirs
                // whole (a big tree's chunks read their own).
                var later: [UInt32] = []
                for next in round.trees[(round.done + 1)...] {
                    guard let header = try txn.treeRecord(CountedTree(id: next).recordKey(headerNode)).map(Header.init)
                    else { continue }
                    if round.chunk == 0 || header.count < ViewBuffer.bigTree { later.append(next) }
                }
                let ops = try ViewBuffer.roundOps(of: tree.id, from: since, to: round.end, later: later, txn)
                try tree.takeChanges(BufferedDelta.netChanges(ops), rebuilding: nil, txn)
            }
            round.done += 1
            round.partial = nil
            break
        }
        state.round = round
        guard round.done == round.trees.count else { return try ViewBuffer.store(state, txn) }
        // Every tree holds its ops before the end: the stream keeps the ops after it.
        var later: [(number: UInt64, tree: UInt32, insert: Bool, key: [UInt8])] = []
        try ViewBuffer.forEachOp(round.end..<state.nextOp, txn) { number, tree, insert, key in
            later.append((number, tree, insert, key))
        }
        try ViewBuffer.removeOps(txn)
        txn.keepRoundOps(nil)
        state.firstOp = round.end
        state.epoch += 1
        state.round = nil
        let trees = Set(later.map(\.tree))
        state.counts.removeAll { !trees.contains($0.tree) }
        try ViewBuffer.store(state, txn)
        for op in later { try ViewBuffer.append(op.number, tree: op.tree, insert: op.insert, key: op.key, txn) }
    }

    /// Puts every pending op into its tree's nodes at once (a round in progress included): tree by
    /// tree, key by key; empties the stream. `rebuilding` (for tests) picks the way every tree
    /// takes its changes; nil lets the merge choose (see `takeChanges`).
    func merge(_ txn: StoreTransaction, rebuilding: Bool? = nil) throws {
        try Self.mergeAll(txn, rebuilding: rebuilding.map { choice in { _ in choice } })
    }

    static func mergeAll(_ txn: StoreTransaction, rebuilding: ((UInt32) -> Bool)? = nil) throws {
        var state = try ViewBuffer.state(txn)
        guard state.pending > 0 else { return }
        let opsByTree = try ViewBuffer.opsByTree(state, txn)
        try ViewBuffer.removeOps(txn)
        txn.keepRoundOps(nil)
        state.firstOp = state.nextOp
        state.epoch += 1
        state.round = nil
        state.counts = []
        try ViewBuffer.store(state, txn)
        for tree in opsByTree.keys.sorted() {
            let tree = CountedTree(id: tree)
            // A dropped view's ops go with it.
            guard try txn.treeRecord(tree.recordKey(headerNode)) != nil else { continue }
            try tree.takeChanges(BufferedDelta.netChanges(opsByTree[tree.id]!), rebuilding: rebuilding?(tree.id), txn)
        }
    }

    /// Puts a merge's `changes` (ascending) into the nodes. A tree with at least as many changes as
    /// leaves is written anew (`rebuild`): most of its leaves would change anyway, and a pass in key
    /// order costs a fraction of a descent and a `settle` per leaf. A larger tree takes its changes a
    /// leaf at a time (`applyChanges`). The choice depends on the tree and the ops alone, so
    /// replaying the log makes the same one; `rebuilding` (for tests) makes it.
    private func takeChanges(_ changes: [BufferedDelta.Change], rebuilding: Bool?, _ txn: StoreTransaction) throws {
        let header = try header(txn)
        let nodes = try nodeIDs(header, txn)
        if rebuilding ?? (changes.count >= nodes.leaves.count) {
            try rebuild(header, nodes: nodes, with: changes, txn)
        } else {
            try applyChanges(changes, txn)
        }
        // Puts in any keys held back for appending, and forgets the tree's last key: its next
        // insert must be an op.
        _ = try self.header(txn)
    }

    /// Puts `changes` (ascending) into the nodes a leaf at a time: one descent, one leaf changed in
    /// place and one `settle` for all the changes that land in a leaf, until it must split. A
    /// removal that would leave its leaf under a quarter full goes through `removeFromNodes`,
    /// which merges leaves.
    private func applyChanges(_ changes: [BufferedDelta.Change], _ txn: StoreTransaction) throws {
        var next = 0
        while next < changes.count {
            var header = try header(txn)
            var path = try descend(to: changes[next].key, header, txn, taking: true)
            var leaf = try take(path.leafID, txn)
            // The leaf holds the keys below the fence of the first branch on the way up with a child after the path's.
            var bound: ArraySlice<UInt8>?
            for branch in path.branches.reversed() where branch.index + 1 < branch.node.count {
                bound = branch.node.fence(branch.index + 1)
                break
            }
            var net = 0
            var applied = 0
            while next < changes.count {
                let change = changes[next]
                if let bound, compareBytes(change.key, bound) >= 0 { break }
                let (index, found) = leaf.search(change.key)
                guard found != change.added else {
                    throw StoreError.corrupted(
                        "tree \(id): a merged op \(change.added ? "adds a key it holds" : "removes a key it lacks")")
                }
                if change.added {
                    leaf.insert(change.key, at: index)
                    net += 1
                } else {
                    var trial = leaf
                    trial.remove(at: index)
                    if trial.count == 0 || trial.size < Self.maxNodeBytes / 4 { break }
                    leaf = trial
                    net -= 1
                }
                next += 1
                applied += 1
                if leaf.size > Self.maxNodeBytes { break }
            }
            if applied == 0 {
                // A removal that needs the general path: the taken nodes go back as they were.
                try store(&leaf, as: path.leafID, txn)
                for depth in path.branches.indices where path.branches[depth].taken {
                    try store(&path.branches[depth].node, as: path.branches[depth].id, txn)
                }
                if try !removeFromNodes(changes[next].key, try self.header(txn), txn) {
                    throw StoreError.corrupted("tree \(id): a merged op removes a key it lacks")
                }
                next += 1
                continue
            }
            path.addToCounts(net)
            header.count = UInt64(Int(header.count) + net)
            try settle(leaf, &path, &header, txn)
        }
    }

    /// The tree's node ids read from its branches: the branches level by level from the root, and
    /// the leaves in key order.
    func nodeIDs(_ txn: StoreTransaction) throws -> (branches: [UInt64], leaves: [UInt64]) {
        try nodeIDs(header(txn), txn)
    }

    private func nodeIDs(_ header: Header, _ txn: StoreTransaction) throws -> (branches: [UInt64], leaves: [UInt64]) {
        var branches: [UInt64] = []
        var level = [header.root]
        for _ in 0..<header.height {
            branches.append(contentsOf: level)
            var below: [UInt64] = []
            for branchID in level {
                let branch = try loadBranch(branchID, txn)
                for index in 0..<branch.count { below.append(branch.childID(index)) }
            }
            level = below
        }
        return (branches, level)
    }

    /// Writes the tree anew with `changes` (ascending) merged into its keys, leaf after leaf in key
    /// order, each leaf filled to `rebuildBytes`, then the branches level by level: for a merge
    /// with at least as many changes as the tree has leaves, which would change most leaves one
    /// descent and one `settle` at a time. The nodes reuse the old ones' ids (the branches', then
    /// each leaf's once its keys are all read), in that order, so the result is a function of the
    /// tree and the changes.
    private func rebuild(
        _ header: Header, nodes: (branches: [UInt64], leaves: [UInt64]), with changes: [BufferedDelta.Change],
        _ txn: StoreTransaction
    ) throws {
        var rebuild = Rebuild(tree: self, header: header, txn: txn)
        // The branches' ids are free at once: every branch was read to find the leaves.
        rebuild.free = nodes.branches
        var next = 0
        for leafID in nodes.leaves {
            let leaf = try load(leafID, txn)
            try leaf.bytes.withUnsafeBytes { raw in
                let node = RawNode(raw)
                for index in 0..<node.count {
                    let key = node.entry(index)
                    var order = 1
                    while next < changes.count {
                        order = changes[next].key.withUnsafeBytes { compareBytes($0, key) }
                        guard order < 0 else { break }
                        try rebuild.add(change: changes[next])
                        next += 1
                    }
                    if order == 0 {
                        guard !changes[next].added else {
                            throw StoreError.corrupted("tree \(id): a merged op adds a key it holds")
                        }
                        next += 1
                        continue
                    }
                    try rebuild.add(key)
                }
            }
            // Every key of this leaf is read (the new leaves hold copies): its id may be reused.
            rebuild.free.append(leafID)
        }
        while next < changes.count {
            try rebuild.add(change: changes[next])
            next += 1
        }
        try rebuild.finish()
    }

    /// The state of a `rebuild`: the ids it may reuse, the leaf being filled, the full one waiting
    /// for the next one's id (its link forward), and each leaf's branch entry.
    private struct Rebuild {
        let tree: CountedTree
        var header: Header
        let txn: StoreTransaction
        var free: [UInt64] = []
        var nextFree = 0
        var builder = LeafBuilder()
        var pending: (id: UInt64, node: TreeNode, lastKey: [UInt8])?
        var entries: [(id: UInt64, count: UInt64, fence: [UInt8])] = []
        var total: UInt64 = 0

        init(tree: CountedTree, header: Header, txn: StoreTransaction) {
            self.tree = tree
            self.header = header
            self.txn = txn
        }

        mutating func newID() -> UInt64 {
            if nextFree < free.count {
                nextFree += 1
                return free[nextFree - 1]
            }
            header.nextNode += 1
            return header.nextNode - 1
        }

        mutating func add(_ key: UnsafeRawBufferPointer) throws {
            if !builder.isEmpty && builder.size(adding: key.count) > CountedTree.rebuildBytes { try closeLeaf() }
            builder.append(key)
        }

        mutating func add(change: BufferedDelta.Change) throws {
            guard change.added else {
                throw StoreError.corrupted("tree \(tree.id): a merged op removes a key it lacks")
            }
            try change.key.withUnsafeBytes { try add($0) }
        }

        mutating func closeLeaf() throws {
            let id = newID()
            if var previous = pending {
                previous.node.next = id
                try tree.store(&previous.node, as: previous.id, txn)
                entries.append(
                    (
                        id, UInt64(builder.count),
                        CountedTree.separator(after: previous.lastKey[...], before: builder.firstKey)
                    ))
            } else {
                entries.append((id, UInt64(builder.count), []))
            }
            total += UInt64(builder.count)
            pending = (
                id, builder.node(previous: pending?.id ?? 0, next: 0), builder.isEmpty ? [] : Array(builder.lastKey)
            )
            builder.removeAll()
        }

        /// Stores the last leaf, then the branches level by level until one node holds the rest
        /// (the root), drops the ids not reused, and stores the header.
        mutating func finish() throws {
            if !builder.isEmpty || pending == nil { try closeLeaf() }
            if var last = pending { try tree.store(&last.node, as: last.id, txn) }
            var height = 0
            while entries.count > 1 {
                var groups: [Range<Int>] = []
                var start = 0
                var size = TreeNode.branchHeaderSize + 2
                for index in entries.indices {
                    let entrySize = 2 + 16 + entries[index].fence.count
                    if index > start && size + entrySize > CountedTree.rebuildBytes {
                        groups.append(start..<index)
                        start = index
                        size = TreeNode.branchHeaderSize + 2
                    }
                    size += entrySize
                }
                groups.append(start..<entries.count)
                // A branch of one child would be a level for nothing: the one before gives it its last.
                if groups.count > 1, groups[groups.count - 1].count == 1 {
                    let last = groups.removeLast()
                    let before = groups.removeLast()
                    groups.append(before.lowerBound..<(before.upperBound - 1))
                    groups.append((before.upperBound - 1)..<last.upperBound)
                }
                var above: [(id: UInt64, count: UInt64, fence: [UInt8])] = []
                for group in groups {
                    let id = newID()
                    var branch = TreeNode.branch(
                        children: entries[group].map { TreeNode.child($0.id, count: $0.count, fence: $0.fence) })
                    try tree.store(&branch, as: id, txn)
                    above.append((id, entries[group].reduce(0) { $0 + $1.count }, entries[group.lowerBound].fence))
                }
                entries = above
                height += 1
            }
            for unused in free[nextFree...] { try txn.removeTreeRecord(tree.recordKey(unused)) }
            header.root = entries[0].id
            header.height = height
            header.count = total
            try tree.store(header, txn)
        }
    }

    /// How full `rebuild` makes a node: a little room left for the next merge's keys.
    static let rebuildBytes = maxNodeBytes * 15 / 16

    /// This tree's pending ops as of now, key by key; nil when none. Built on the resolution of
    /// fewer ops from the same `since` that this write or the store's snapshots kept, reading only the
    /// ops after it, with every change's rank in the nodes (unless `ranked` is false: a merge's, a
    /// check's). A write's goes to the store's once the write commits (`Store.write`).
    private func resolved(_ header: Header, _ txn: StoreTransaction, ranked: Bool? = nil) throws -> BufferedDelta? {
        guard header.buffered else { return nil }
        let state = try ViewBuffer.state(txn)
        guard state.count(of: id) != nil else { return nil }
        let ranked = ranked ?? true
        let since = state.since(of: id)
        let base = txn.bufferBase(tree: id, since: since, nextOp: state.nextOp)
        if let base, base.nextOp == state.nextOp, base.ranked || !ranked { return base }
        let ops = try ViewBuffer.ops(of: id, in: max(base?.nextOp ?? since, since)..<state.nextOp, txn)
        let rank: (([UInt8]) throws -> Int)? = ranked ? { key in try self.nodeRank(of: key, header, txn) } : nil
        let delta = try BufferedDelta.building(on: base, since: since, nextOp: state.nextOp, ops: ops, rank: rank)
        txn.keepBuffer(delta, tree: id)
        return delta
    }

    /// Works out the pending ops of every buffered tree at once, with their ranks, and leaves the
    /// resolutions where the next snapshots of this state find them (`txn` is a read's, with the
    /// store's resolution cache): reads the op stream once for all trees. A store opened after a
    /// restart has no resolutions, so that the first read of each view would otherwise read and
    /// sort every pending op of the stream (50 ms for 65,536). Returns the trees and their ops.
    static func resolveAll(_ txn: StoreTransaction) throws -> (trees: Int, ops: Int) {
        guard txn.viewOps != nil else { return (0, 0) }
        let state = try ViewBuffer.state(txn)
        guard state.pending > 0, !state.counts.isEmpty else { return (0, 0) }
        var resolved = (trees: 0, ops: 0)
        // A dropped view's ops stay until the stream is emptied; it has no count.
        for (id, ops) in try ViewBuffer.opsByTree(state, txn).sorted(by: { $0.key < $1.key })
        where state.count(of: id) != nil {
            let tree = CountedTree(id: id)
            let header = try tree.header(txn)
            guard header.buffered else { continue }
            let delta = try BufferedDelta.building(
                on: nil, since: state.since(of: id), nextOp: state.nextOp, ops: ops,
                rank: { key in try tree.nodeRank(of: key, header, txn) })
            txn.keepBuffer(delta, tree: id)
            resolved.trees += 1
            resolved.ops += ops.count
        }
        return resolved
    }

    /// The rank of `key` among the keys in the nodes (not the ops).
    private func nodeRank<K: Collection<UInt8>>(
        of key: K, inclusive: Bool = false, _ header: Header, _ txn: StoreTransaction
    ) throws -> Int {
        try nodeRankAndPosition(of: key, inclusive: inclusive, header, txn).rank
    }

    /// The keys in the nodes less than `key` (or equal, with `inclusive`), and the leaf and index of
    /// the first key after them: one descent.
    private func nodeRankAndPosition<K: Collection<UInt8>>(
        of key: K, inclusive: Bool, _ header: Header, _ txn: StoreTransaction
    ) throws
        -> (rank: Int, position: Position)
    {
        var step = Descent(node: header.root, total: header.count)
        for _ in 0..<header.height { step.enter(try loadBranch(step.node, txn), toward: key) }
        let index = try load(step.node, txn).search(key, strictly: inclusive).index
        return (Int(step.rank) + index, Position(leaf: step.node, index: index))
    }

    /// A change's rank in the nodes, worked out if the resolution lacks it.
    private func treeRank(_ change: BufferedDelta.Change, _ header: Header, _ txn: StoreTransaction) throws -> Int {
        change.treeRank >= 0 ? change.treeRank : try nodeRank(of: change.key, header, txn)
    }

    // MARK: Lookups

    private struct Path {
        /// `index`: the child the path goes down to; `total`: the keys under the branch;
        /// `changed`: a count stored in it changed, or a child came or went (it must be stored);
        /// `taken`: it was taken out of the write's cache (it must be stored, changed or not).
        var branches: [(id: UInt64, node: TreeNode, index: Int, total: UInt64, changed: Bool, taken: Bool)]
        var leafID: UInt64

        /// A key added (1) or removed (-1) under the path: each branch's total, and its count for
        /// the child on the path unless that child is its last (whose count is not stored).
        mutating func addToCounts(_ delta: Int) {
            for depth in branches.indices {
                branches[depth].total = UInt64(bitPattern: Int64(bitPattern: branches[depth].total) &+ Int64(delta))
                let index = branches[depth].index
                guard index != branches[depth].node.count - 1 else { continue }
                branches[depth].node.addToChildCount(index, delta)
                branches[depth].changed = true
            }
        }
    }

    /// The branches from the root down to `key`'s leaf, each with what it holds; with `taking`,
    /// each is taken out of the write's cache (see `take`) to be changed in place, and must be
    /// stored again if it was in the cache (`taken`).
    private func descend<K: Collection<UInt8>>(
        to key: K, _ header: Header, _ txn: StoreTransaction, taking: Bool = false
    ) throws -> Path {
        var branches: [(id: UInt64, node: TreeNode, index: Int, total: UInt64, changed: Bool, taken: Bool)] = []
        branches.reserveCapacity(header.height)
        var nodeID = header.root
        var total = header.count
        for _ in 0..<header.height {
            let (node, taken) = taking ? try takeBranch(nodeID, txn) : (try loadBranch(nodeID, txn), false)
            let index = node.childIndex(for: key)
            branches.append((nodeID, node, index, total, false, taken))
            // The others' counts are summed only for the last child, whose count is not stored.
            total = Self.count(
                of: index, in: node, total: total,
                before: index == node.count - 1 ? Self.keys(before: index, in: node) : 0)
            nodeID = node.childID(index)
        }
        return Path(branches: branches, leafID: nodeID)
    }

    /// The position of the first key ≥ `key` (> with `strictly`); past the end if none.
    func position<K: Collection<UInt8>>(of key: K, strictly: Bool = false, _ txn: StoreTransaction) throws -> Position {
        let header = try header(txn)
        var position = try nodePosition(of: key, strictly: strictly, header, txn)
        if let delta = try resolved(header, txn), delta.changeCount > 0 {
            position.changes = delta
            position.change = delta.lowerBound(key, strictly: strictly)
        }
        return position
    }

    private func nodePosition<K: Collection<UInt8>>(
        of key: K, strictly: Bool, _ header: Header, _ txn: StoreTransaction
    ) throws -> Position {
        let path = try descend(to: key, header, txn)
        let leaf = try load(path.leafID, txn)
        return Position(leaf: path.leafID, index: leaf.search(key, strictly: strictly).index)
    }

    /// How many keys are less than `key` (less than or equal, with `inclusive`): the rank of the
    /// first key after them. O(log n).
    func rank<K: Collection<UInt8>>(of key: K, inclusive: Bool = false, _ txn: StoreTransaction) throws -> Int {
        try rank(of: key, inclusive: inclusive, from: top(txn), txn)
    }

    func rank<K: Collection<UInt8>>(of key: K, inclusive: Bool = false, from top: Top, _ txn: StoreTransaction) throws
        -> Int
    {
        let inNodes = try nodeRank(of: key, inclusive: inclusive, top.header, txn)
        guard let delta = top.delta else { return inNodes }
        let before = delta.lowerBound(key, strictly: inclusive)
        return inNodes + delta.addedBefore(before) - delta.removedBefore(before)
    }

    /// `rank(of: key, inclusive: true)`, and where a forward scan of the keys after `key` starts,
    /// in one descent: a page after a cursor needs both. Nil while ops are pending for the tree
    /// (then the rank, and the position at that rank, take the ops into account).
    func rankAndPosition<K: Collection<UInt8>>(after key: K, from top: Top, _ txn: StoreTransaction) throws -> (
        rank: Int, position: Position
    )? {
        if let delta = top.delta, delta.changeCount > 0 { return nil }
        return try nodeRankAndPosition(of: key, inclusive: true, top.header, txn)
    }

    /// The ranks of `low` and of `high` (as `rank(of:)`), descending together while both keys lie
    /// under the same nodes: the bounds of a range and its size, for little more than one descent.
    func ranks<A: Collection<UInt8>, B: Collection<UInt8>>(of low: A, and high: B, _ txn: StoreTransaction) throws -> (
        low: Int, high: Int
    ) {
        try ranks(of: low, and: high, from: top(txn), txn)
    }

    func ranks<A: Collection<UInt8>, B: Collection<UInt8>>(
        of low: A, and high: B, from top: Top, _ txn: StoreTransaction
    ) throws
        -> (low: Int, high: Int)
    {
        let header = top.header
        var lower = Descent(node: header.root, total: header.count)
        var upper = lower
        for _ in 0..<header.height {
            let node = try loadBranch(lower.node, txn)
            let other = upper.node == lower.node ? node : try loadBranch(upper.node, txn)
            lower.enter(node, toward: low)
            upper.enter(other, toward: high)
        }
        let leaf = try load(lower.node, txn)
        let otherLeaf = upper.node == lower.node ? leaf : try load(upper.node, txn)
        var ranks = (
            low: Int(lower.rank) + leaf.search(low).index, high: Int(upper.rank) + otherLeaf.search(high).index
        )
        if let delta = top.delta {
            let beforeLow = delta.lowerBound(low)
            let beforeHigh = delta.lowerBound(high)
            ranks.low += delta.addedBefore(beforeLow) - delta.removedBefore(beforeLow)
            ranks.high += delta.addedBefore(beforeHigh) - delta.removedBefore(beforeHigh)
        }
        return ranks
    }

    /// A descent by key, counting the keys left behind.
    private struct Descent {
        var node: UInt64
        /// Keys under `node` (the parent's count for it; the header's for the root).
        var total: UInt64
        var rank: UInt64 = 0

        init(node: UInt64, total: UInt64) {
            self.node = node
            self.total = total
        }

        mutating func enter<K: Collection<UInt8>>(_ branch: TreeNode, toward key: K) {
            let index = branch.childIndex(for: key)
            let before = CountedTree.keys(before: index, in: branch)
            rank &+= before
            total = CountedTree.count(of: index, in: branch, total: total, before: before)
            node = branch.childID(index)
        }
    }

    /// How many keys the children before `index` hold, from their stored counts (every child's is
    /// stored but the last's, which is never before another).
    private static func keys(before index: Int, in branch: TreeNode) -> UInt64 {
        branch.childCounts(before: index)
    }

    /// The keys under child `index` of a branch that holds `total`, the children before it `before`:
    /// its stored count, or for the last child (stored as 0) what the others leave.
    private static func count(of index: Int, in branch: TreeNode, total: UInt64, before: UInt64) -> UInt64 {
        index == branch.count - 1 ? total &- before : branch.childCount(index)
    }

    /// The position of the key at `rank` (0-based); past the end if rank ≥ count.
    func position(atRank rank: Int, _ txn: StoreTransaction) throws -> Position {
        try position(atRank: rank, from: top(txn), txn)
    }

    func position(atRank rank: Int, from top: Top, _ txn: StoreTransaction) throws -> Position {
        guard let delta = top.delta, delta.changeCount > 0 else {
            return try nodePosition(atRank: rank, top.header, txn)
        }
        let header = top.header
        let rank = max(0, rank)
        // The keys before change i number mergedBefore(i): the nodes' keys below it, plus the
        // changes before it that add, less those that remove. Find the last change at or before `rank`.
        func mergedBefore(_ index: Int) throws -> Int {
            try treeRank(delta.change(index), header, txn) + delta.addedBefore(index) - delta.removedBefore(index)
        }
        var low = 0
        var high = delta.changeCount
        while low < high {
            let middle = (low + high) / 2
            if try mergedBefore(middle) <= rank { low = middle + 1 } else { high = middle }
        }
        var position: Position
        if low == 0 {
            position = try nodePosition(atRank: rank, header, txn)
            position.change = 0
        } else {
            let index = low - 1
            let change = delta.change(index)
            let before = try mergedBefore(index)
            if change.added && before == rank {
                position = try nodePosition(of: change.key, strictly: false, header, txn)
                position.change = index
            } else {
                // The nodes' keys after the change (a removed key is in the nodes: skip it).
                let nodeRank =
                    try treeRank(change, header, txn) + (change.added ? 0 : 1) + rank - before - (change.added ? 1 : 0)
                position = try nodePosition(atRank: min(nodeRank, Int(header.count)), header, txn)
                position.change = index + 1
            }
        }
        position.changes = delta
        return position
    }

    private func nodePosition(atRank rank: Int, _ header: Header, _ txn: StoreTransaction) throws -> Position {
        var remaining = UInt64(max(0, rank))
        var total = header.count
        var nodeID = header.root
        for _ in 0..<header.height {
            let node = try loadBranch(nodeID, txn)
            // The last child (whose count is not stored) unless an earlier one holds the rank.
            let (chosen, before) = node.child(holdingRank: remaining)
            remaining &-= before
            total = Self.count(of: chosen, in: node, total: total, before: before)
            nodeID = node.childID(chosen)
        }
        return Position(leaf: nodeID, index: Int(remaining))
    }

    /// The first key ≥ `key`, if any.
    func firstKey(atLeast key: [UInt8], _ txn: StoreTransaction) throws -> [UInt8]? {
        var found: [UInt8]?
        try scan(from: try position(of: key, txn), forward: true, txn) { entry in
            found = Array(entry)
            return false
        }
        return found
    }

    /// The first key starting with `prefix`, if any.
    func firstKey(withPrefix prefix: [UInt8], _ txn: StoreTransaction) throws -> [UInt8]? {
        var found: [UInt8]?
        try scan(from: try position(of: prefix, txn), forward: true, txn) { key in
            if key.starts(with: prefix) { found = Array(key) }
            return false
        }
        return found
    }

    /// Calls `body` with each key from `position` on, ascending or descending, until it returns
    /// false or the keys run out. Descending starts at the key just before `position`. A key's
    /// bytes are valid only during the call that gets them.
    func scan(
        from position: Position, forward: Bool, _ txn: StoreTransaction, _ body: (UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        guard let delta = position.changes else { return try scanNodes(from: position, forward: forward, txn, body) }
        // The nodes' keys, with the changes' added keys put in between and removed keys left out.
        let count = delta.changeCount
        var next = forward ? position.change : position.change - 1
        var stopped = false
        try scanNodes(from: position, forward: forward, txn) { key in
            while forward ? next < count : next >= 0 {
                let change = delta.change(next)
                let order = change.key.withUnsafeBytes { compareBytes($0, key) }
                if forward ? order > 0 : order < 0 { break }
                next += forward ? 1 : -1
                if order == 0 { return true }  // removed
                if change.added, try !change.key.withUnsafeBytes(body) {
                    stopped = true
                    return false
                }
            }
            if try !body(key) {
                stopped = true
                return false
            }
            return true
        }
        if stopped { return }
        while forward ? next < count : next >= 0 {
            let change = delta.change(next)
            next += forward ? 1 : -1
            if change.added, try !change.key.withUnsafeBytes(body) { return }
        }
    }

    /// The nodes' keys from `position` on. A reader's leaves are read where LMDB holds them: a
    /// page reads one or two leaves once each, and a copy of each (4 KiB and an allocation) and a
    /// reference counted slice of every key cost it more than its lookups' descents
    /// (docs/BENCHMARKS.md, "A page's leaves read where LMDB holds them").
    private func scanNodes(
        from position: Position, forward: Bool, _ txn: StoreTransaction, _ body: (UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        var leafID = position.leaf
        var first = true
        repeat {
            let next: UInt64? = try withLeaf(leafID, txn) { leaf in
                // Forward from `position.index` in the first leaf, from the start in the others;
                // backward from just before it, or from the end.
                let count = leaf.count
                var index = forward ? (first ? position.index : 0) : (first ? min(position.index, count) : count) - 1
                while forward ? index < count : index >= 0 {
                    guard let key = leaf.entry(index) else {
                        throw StoreError.corrupted("tree \(id): leaf \(leafID) is damaged")
                    }
                    if try !body(key) { return nil }
                    index += forward ? 1 : -1
                }
                return forward ? leaf.next : leaf.previous
            }
            guard let next else { return }
            first = false
            leafID = next
        } while leafID != 0
    }

    /// Runs `body` on leaf `node`: in place in a read snapshot, on the node as the write has it
    /// otherwise (its cache may hold it changed).
    private func withLeaf<R>(_ node: UInt64, _ txn: StoreTransaction, _ body: (RawLeaf) throws -> R) throws -> R {
        func run(_ raw: UnsafeRawBufferPointer) throws -> R {
            guard let leaf = RawLeaf(raw) else {
                throw StoreError.corrupted("tree \(id): node \(node) is not a sound leaf")
            }
            return try body(leaf)
        }
        guard txn.cache == nil else { return try load(node, txn).bytes.withUnsafeBytes(run) }
        guard let raw = try txn.treeRecordInPlace(recordKey(node)) else {
            throw StoreError.corrupted("tree \(id) lacks node \(node)")
        }
        return try run(raw)
    }

    /// Every key in order: for checks and digests.
    func forEach(_ txn: StoreTransaction, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        try scan(from: try position(atRank: 0, txn), forward: true, txn) { key in
            try body(key)
            return true
        }
    }
}

extension CountedTree {
    /// Checks the structure: keys strictly increasing along the leaf chain, every branch count equal to
    /// the keys below it, fences below their subtrees, links consistent, the header's count right.
    /// Returns the problems found (empty when sound).
    func structuralProblems(_ txn: StoreTransaction) throws -> [String] {
        var problems: [String] = []
        let header = try header(txn)
        var leaves: [UInt64] = []
        func walk(_ nodeID: UInt64, depth: Int, lowerBound: [UInt8]?) throws -> UInt64 {
            let node = try load(nodeID, txn)
            if depth == header.height {
                guard node.isLeaf else {
                    problems.append("node \(nodeID) at leaf depth is a branch")
                    return 0
                }
                leaves.append(nodeID)
                if let lowerBound, node.count > 0, compareBytes(node.entry(0), lowerBound) < 0 {
                    problems.append("leaf \(nodeID) holds a key below its fence")
                }
                return UInt64(node.count)
            }
            guard !node.isLeaf, node.count > 0 else {
                problems.append("branch \(nodeID) is a leaf or empty")
                return 0
            }
            // Every count but the last child's, which is stored as 0: the branch's own count (its
            // parent's, checked there, or the header's) less the others is what that child holds.
            var total: UInt64 = 0
            for index in 0..<node.count {
                let bound = index == 0 ? lowerBound : Array(node.fence(index))
                let below = try walk(node.childID(index), depth: depth + 1, lowerBound: bound)
                let stored = node.childCount(index)
                if index == node.count - 1 {
                    if stored != 0 {
                        problems.append("branch \(nodeID) stores \(stored) as its last child's count, not 0")
                    }
                } else if below != stored {
                    problems.append("branch \(nodeID) child \(index) counts \(stored), holds \(below)")
                }
                total += below
            }
            return total
        }
        let total = try walk(header.root, depth: 0, lowerBound: nil)
        if total != header.count { problems.append("header counts \(header.count), tree holds \(total)") }
        if header.buffered {
            let delta = try resolved(header, txn)
            let net = delta?.netChange ?? 0
            let counted = try count(txn)
            if counted != Int(header.count) + net {
                problems.append(
                    "the view ops count \(counted) keys, the nodes hold \(header.count) and the ops change \(net)")
            }
            for change in delta?.allChanges ?? [] {
                let position = try nodePosition(of: change.key, strictly: false, header, txn)
                let leaf = try load(position.leaf, txn)
                let held = position.index < leaf.count && leaf.entry(position.index).elementsEqual(change.key)
                if held == change.added {
                    problems.append(
                        "an op \(change.added ? "adds a key the nodes hold" : "removes a key the nodes lack")")
                }
            }
        }
        var previousKey: [UInt8]?
        var previousLeaf: UInt64 = 0
        for leafID in leaves {
            let leaf = try load(leafID, txn)
            if leaf.previous != previousLeaf {
                problems.append("leaf \(leafID) links back to \(leaf.previous), not \(previousLeaf)")
            }
            for index in 0..<leaf.count {
                let key = Array(leaf.entry(index))
                if let previousKey, compareBytes(previousKey, key) >= 0 {
                    problems.append("keys out of order in leaf \(leafID)")
                }
                previousKey = key
            }
            previousLeaf = leafID
        }
        if let last = leaves.last, try load(last, txn).next != 0 { problems.append("last leaf links forward") }
        return problems
    }
}

extension CountedTree {
    /// Walks the keys in order, one at a time (for merging two trees), a buffered tree's pending
    /// changes included.
    struct KeyIterator {
        let tree: CountedTree
        let txn: StoreTransaction
        private var leaf: TreeNode?
        private var index = 0
        private let changes: [BufferedDelta.Change]
        private var change = 0

        init(_ tree: CountedTree, _ txn: StoreTransaction) throws {
            self.tree = tree
            self.txn = txn
            let start = try tree.position(atRank: 0, txn)
            leaf = try tree.load(start.leaf, txn)
            index = start.index
            changes = start.changes?.allChanges ?? []
            change = start.change
        }

        /// The next key in the nodes, without moving past it.
        private mutating func peekNode() throws -> [UInt8]? {
            while let current = leaf {
                if index < current.count { return Array(current.entry(index)) }
                leaf = current.next == 0 ? nil : try tree.load(current.next, txn)
                index = 0
            }
            return nil
        }

        mutating func next() throws -> [UInt8]? {
            while true {
                let node = try peekNode()
                if change < changes.count, node.map({ compareBytes(changes[change].key, $0) <= 0 }) ?? true {
                    let pending = changes[change]
                    change += 1
                    if let node, pending.key == node {
                        index += 1  // removed
                        continue
                    }
                    if pending.added { return pending.key }
                    continue
                }
                guard let node else { return nil }
                index += 1
                return node
            }
        }
    }
}
