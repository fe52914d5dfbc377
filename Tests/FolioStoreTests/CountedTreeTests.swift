import LMDB
import Testing

@testable import FolioStore

@Suite struct CountedTreeTests {
    /// A tree in a fresh environment; `write` runs a closure in a write transaction whose tree
    /// changes are cached and flushed at the end (`cached`) or written through.
    private struct Fixture {
        let environment: Environment
        let database: Database
        let tree: CountedTree
        let cached: Bool

        func write(_ body: (StoreTransaction) throws -> Void) throws {
            try environment.write { lmdb in
                let txn = StoreTransaction(
                    lmdb: lmdb, trees: database, cache: cached ? TreeNodeCache(parent: nil) : nil)
                try body(txn)
                try txn.flushTrees()
            }
        }

        func read(_ body: (StoreTransaction) throws -> Void) throws {
            try environment.read { lmdb in try body(StoreTransaction(lmdb: lmdb, trees: database, cache: nil)) }
        }
    }

    private func withTree(cached: Bool = false, _ body: (Fixture) throws -> Void) throws {
        try withTemporaryDirectory { path in
            let environment = try Environment(path: path)
            let database = try environment.openDatabase("trees")
            let tree = try environment.write { txn in
                try CountedTree.create(id: 7, StoreTransaction(lmdb: txn, trees: database, cache: nil))
            }
            try body(Fixture(environment: environment, database: database, tree: tree, cached: cached))
        }
    }

    private func randomKey(_ random: inout SeededGenerator, maxLength: Int) -> [UInt8] {
        (0..<Int.random(in: 1...maxLength, using: &random)).map { _ in UInt8.random(in: 0...3, using: &random) }
    }

    private func allKeys(_ tree: CountedTree, _ txn: StoreTransaction) throws -> [[UInt8]] {
        var keys: [[UInt8]] = []
        try tree.forEach(txn) { keys.append(Array($0)) }
        return keys
    }

    @Test(arguments: [
        (seed: UInt64(1), maxLength: 8, cached: false), (2, 120, false), (3, 400, false), (4, 8, true), (5, 120, true),
    ])
    func randomInsertsAndRemovesMatchASortedArray(seed: UInt64, maxLength: Int, cached: Bool) throws {
        try withTree(cached: cached) { fixture in
            let tree = fixture.tree
            var random = SeededGenerator(seed: seed)
            var model: [[UInt8]] = []
            for round in 0..<40 {
                try fixture.write { txn throws in
                    for _ in 0..<150 {
                        // Grow during the first rounds, then shrink to nothing.
                        let removing =
                            round >= 25
                            ? Int.random(in: 0..<10, using: &random) < 8 : Int.random(in: 0..<10, using: &random) < 3
                        if removing, !model.isEmpty {
                            let key = model.remove(at: Int.random(in: 0..<model.count, using: &random))
                            #expect(try tree.remove(key, txn))
                        } else {
                            let key = randomKey(&random, maxLength: maxLength)
                            let (index, found) = model.binarySearch(key)
                            #expect(try tree.insert(key, txn) == !found)
                            if !found { model.insert(key, at: index) }
                        }
                    }
                    #expect(try !tree.remove([9, 9, 9], txn))
                }
                try fixture.read { txn throws in
                    #expect(try tree.structuralProblems(txn) == [])
                    #expect(try tree.count(txn) == model.count)
                    #expect(try allKeys(tree, txn) == model)
                    for _ in 0..<20 where !model.isEmpty {
                        let rank = Int.random(in: 0..<model.count, using: &random)
                        var page: [[UInt8]] = []
                        try tree.scan(from: try tree.position(atRank: rank, txn), forward: true, txn) {
                            page.append(Array($0))
                            return page.count < 5
                        }
                        #expect(page == Array(model[rank..<min(model.count, rank + 5)]))
                        var backwards: [[UInt8]] = []
                        try tree.scan(from: try tree.position(atRank: rank, txn), forward: false, txn) {
                            backwards.append(Array($0))
                            return backwards.count < 5
                        }
                        #expect(backwards == Array(model[max(0, rank - 5)..<rank].reversed()))
                        let probe = randomKey(&random, maxLength: maxLength)
                        var after: [UInt8]?
                        try tree.scan(from: try tree.position(of: probe, strictly: true, txn), forward: true, txn) {
                            after = Array($0)
                            return false
                        }
                        #expect(after == model.first { compareBytes($0, probe) > 0 })
                        // Ranks, alone and in pairs (counted from either end of each branch).
                        let other = randomKey(&random, maxLength: maxLength)
                        let (low, high) = compareBytes(probe, other) <= 0 ? (probe, other) : (other, probe)
                        let lowRank = model.binarySearch(low).index
                        let highRank = model.binarySearch(high).index
                        #expect(try tree.rank(of: low, txn) == lowRank)
                        #expect(
                            try tree.rank(of: low, inclusive: true, txn) == lowRank
                                + (model.binarySearch(low).found ? 1 : 0))
                        let pair = try tree.ranks(of: low, and: high, txn)
                        #expect(pair.low == lowRank && pair.high == highRank, "ranks of \(low) and \(high)")
                    }
                    // Every rank, and past the end: the key there, found from either end of each branch.
                    for rank in 0...model.count {
                        var first: [UInt8]?
                        try tree.scan(from: try tree.position(atRank: rank, txn), forward: true, txn) {
                            first = Array($0)
                            return false
                        }
                        #expect(
                            first == (rank < model.count ? model[rank] : nil),
                            "the key at rank \(rank) of \(model.count)")
                    }
                }
            }
            try fixture.write { txn throws in
                for key in model.shuffled(using: &random) { #expect(try tree.remove(key, txn)) }
                #expect(try tree.count(txn) == 0)
                #expect(try tree.structuralProblems(txn) == [])
            }
            try fixture.read { txn throws in
                #expect(
                    try txn.lmdb.statistics(fixture.database).entries == 2, "only the header and an empty root remain")
            }
        }
    }

    /// Keys that mostly arrive in order, as the creation-order tree's do: inserts after the last key
    /// take a shortcut past the search (`TreeNode.search`, `childIndex`), which must land where the
    /// search would, beside random keys and removals.
    @Test(arguments: [false, true])
    func keysArrivingInOrderMatchASortedArray(cached: Bool) throws {
        try withTree(cached: cached) { fixture in
            let tree = fixture.tree
            var random = SeededGenerator(seed: 21)
            var model: [[UInt8]] = []
            var counter: UInt32 = 0
            for _ in 0..<12 {
                try fixture.write { txn throws in
                    for _ in 0..<400 {
                        let roll = Int.random(in: 0..<20, using: &random)
                        if roll == 0, !model.isEmpty {
                            let key = model.remove(at: Int.random(in: 0..<model.count, using: &random))
                            #expect(try tree.remove(key, txn))
                            continue
                        }
                        var key: [UInt8]
                        if roll == 1 {
                            key = randomKey(&random, maxLength: 12)
                        } else if roll == 2, let last = model.last {
                            key = last  // the last key again: already there
                        } else {
                            counter += UInt32.random(in: 1...3, using: &random)
                            key = withUnsafeBytes(of: counter.bigEndian) { Array($0) }
                            key += (0..<Int.random(in: 0...20, using: &random)).map { _ in
                                UInt8.random(in: 0...255, using: &random)
                            }
                        }
                        let (index, found) = model.binarySearch(key)
                        #expect(try tree.insert(key, txn) == !found)
                        if !found { model.insert(key, at: index) }
                    }
                }
                try fixture.read { txn throws in
                    #expect(try tree.structuralProblems(txn) == [])
                    #expect(try allKeys(tree, txn) == model)
                    guard let last = model.last else { return }
                    #expect(try tree.rank(of: last, txn) == model.count - 1)
                    #expect(try tree.rank(of: last, inclusive: true, txn) == model.count)
                    var after: [UInt8]?
                    try tree.scan(from: try tree.position(of: last, strictly: true, txn), forward: true, txn) {
                        after = Array($0)
                        return false
                    }
                    #expect(after == nil, "nothing after the last key")
                    try tree.scan(from: try tree.position(of: last, txn), forward: true, txn) {
                        after = Array($0)
                        return false
                    }
                    #expect(after == last)
                }
            }
        }
    }

    /// Keys after every key are held back in a cached write and put in together (`insert`,
    /// `applyAppends`); the nodes must come out byte for byte as inserting each at once gives them
    /// (trees are compared with their replay), whatever comes between: reads of the tree, which see
    /// the keys held back, removals of them, keys elsewhere, a nested transaction, other trees.
    @Test(arguments: [UInt64(41), 42, 43])
    func appendsHeldBackBuildTheNodesThatInsertsOneByOneBuild(seed: UInt64) throws {
        try withTemporaryDirectory { path in
            let environment = try Environment(path: path)
            let held = try environment.openDatabase("held")
            let direct = try environment.openDatabase("direct")
            let trees = try environment.write { lmdb in
                try (0..<3).map { id in
                    let tree = try CountedTree.create(
                        id: UInt32(id), StoreTransaction(lmdb: lmdb, trees: held, cache: nil))
                    _ = try CountedTree.create(id: UInt32(id), StoreTransaction(lmdb: lmdb, trees: direct, cache: nil))
                    return tree
                }
            }
            var random = SeededGenerator(seed: seed)
            var models = [[[UInt8]]](repeating: [], count: trees.count)
            var counters = [UInt32](repeating: 0, count: trees.count)
            for _ in 0..<6 {
                try environment.write { lmdb in
                    let cached = StoreTransaction(lmdb: lmdb, trees: held, cache: TreeNodeCache(parent: nil))
                    let plain = StoreTransaction(lmdb: lmdb, trees: direct, cache: nil)
                    for step in 0..<900 {
                        let which = Int.random(in: 0..<trees.count, using: &random)
                        let tree = trees[which]
                        let roll = Int.random(in: 0..<40, using: &random)
                        if roll == 0, !models[which].isEmpty {
                            // Often one of the last keys: one still held back.
                            let index = max(0, models[which].count - Int.random(in: 1...5, using: &random))
                            let key = models[which].remove(at: index)
                            let removedHeld = try tree.remove(key, cached)
                            let removedDirect = try tree.remove(key, plain)
                            #expect(removedHeld && removedDirect)
                        } else if roll == 1 {
                            let count = try tree.count(cached)
                            let directCount = try tree.count(plain)
                            #expect(count == models[which].count && count == directCount)
                            if let last = models[which].last {
                                #expect(try tree.rank(of: last, cached) == models[which].count - 1)
                            }
                        } else if step % 300 == 150 {
                            // A nested transaction: it must find the keys held back, and what it adds
                            // stays only if it commits (the direct tree takes the key only then).
                            let commit = Bool.random(using: &random)
                            counters[which] += 1
                            let key = withUnsafeBytes(of: counters[which].bigEndian) { Array($0) }
                            let (index, found) = models[which].binarySearch(key)
                            try cached.applyHeldAppends()
                            do {
                                try lmdb.nested { child in
                                    let inner = cached.nested(child)
                                    #expect(try tree.count(inner) == models[which].count)
                                    #expect(try tree.insert(key, inner) == !found)
                                    if !commit { throw StoreError.invalid("roll back") }
                                    inner.cache?.mergeIntoParent()
                                }
                            } catch StoreError.invalid {}
                            if commit {
                                #expect(try tree.insert(key, plain) == !found)
                                if !found { models[which].insert(key, at: index) }
                            }
                        } else {
                            var key: [UInt8]
                            if roll == 3 {
                                key = randomKey(&random, maxLength: 6)
                            } else {
                                counters[which] += UInt32.random(in: 1...3, using: &random)
                                key = withUnsafeBytes(of: counters[which].bigEndian) { Array($0) }
                                key += (0..<Int.random(in: 0...30, using: &random)).map { _ in
                                    UInt8.random(in: 0...255, using: &random)
                                }
                            }
                            let (index, found) = models[which].binarySearch(key)
                            #expect(try tree.insert(key, cached) == !found)
                            #expect(try tree.insert(key, plain) == !found)
                            if !found { models[which].insert(key, at: index) }
                        }
                    }
                    try cached.flushTrees()
                }
                try environment.read { lmdb in
                    var differences: [StoreDifference] = []
                    try Store.compare(held, lmdb, direct, lmdb, limit: 5, into: &differences)
                    #expect(differences.isEmpty, "\(differences)")
                    let txn = StoreTransaction(lmdb: lmdb, trees: held, cache: nil)
                    for (which, tree) in trees.enumerated() {
                        #expect(try tree.structuralProblems(txn) == [])
                        #expect(try allKeys(tree, txn) == models[which])
                    }
                }
            }
        }
    }

    /// Trees are compared byte for byte with their replay, so a split must give exactly the nodes that
    /// building each half from its entries gives.
    /// A branch stores its last child's count as 0, so an append, which goes down the right edge,
    /// rewrites only the header and the last leaf unless a node splits: the records LMDB copies a
    /// commit (docs/BENCHMARKS.md, "What a durable create writes"). Each append in a write of its
    /// own, cached or not; the tree grows to three levels of branches.
    @Test(arguments: [false, true])
    func anAppendRewritesOnlyTheHeaderAndTheLastLeafUnlessANodeSplits(cached: Bool) throws {
        try withTree(cached: cached) { fixture in
            let tree = fixture.tree
            func records() throws -> [UInt64: [UInt8]] {
                var records: [UInt64: [UInt8]] = [:]
                try fixture.read { txn throws in
                    for node in try txn.treeNodes(tree.id) {
                        records[node] = try txn.treeRecord(TreeNodeCache.NodeKey(tree: tree.id, node: node))
                    }
                }
                return records
            }
            // Keys of 180 bytes that differ only at their end: ten a leaf, and fences as long, ten a
            // branch, so that 2,000 of them stand on three levels of branches.
            func key(_ number: Int) -> [UInt8] {
                [UInt8](repeating: 7, count: 176) + withUnsafeBytes(of: UInt32(number).bigEndian) { Array($0) }
            }
            var before = try records()
            var withoutSplit = 0
            for number in 0..<2_000 {
                try fixture.write { txn throws in #expect(try tree.insert(key(number), txn)) }
                let after = try records()
                let changed = Set(after.keys.filter { after[$0] != before[$0] })
                if after.count == before.count {
                    // No split: the header and one leaf, the last.
                    withoutSplit += 1
                    #expect(
                        changed.count == 2 && changed.contains(CountedTree.headerNode),
                        "append \(number) changed nodes \(changed.sorted())")
                    for node in changed where node != CountedTree.headerNode {
                        #expect(TreeNode(bytes: after[node]!).isLeaf && TreeNode(bytes: after[node]!).next == 0)
                    }
                }
                before = after
            }
            try fixture.read { txn throws in
                #expect(try tree.structuralProblems(txn) == [])
                #expect(try tree.count(txn) == 2_000)
                for rank in stride(from: 0, to: 2_000, by: 37) {
                    var found: [UInt8]?
                    try tree.scan(from: try tree.position(atRank: rank, txn), forward: true, txn) { entry in
                        found = Array(entry)
                        return false
                    }
                    #expect(found == key(rank))
                    #expect(try tree.rank(of: key(rank), txn) == rank)
                }
            }
            #expect(withoutSplit > 1_500)
            #expect(before.filter { $0.key != CountedTree.headerNode && !TreeNode(bytes: $0.value).isLeaf }.count >= 20)
        }
    }

    @Test func aSplitCutsTheBytesThatItsEntriesWouldBuild() {
        var random = SeededGenerator(seed: 31)
        for trial in 0..<400 {
            let isLeaf = trial % 2 == 0
            let n = Int.random(in: 2...80, using: &random)
            let keys = (0..<n).map { _ in randomKey(&random, maxLength: Int.random(in: 1...60, using: &random)) }
            let previous = UInt64.random(in: 0...1_000_000, using: &random)
            let next = UInt64.random(in: 0...1_000_000, using: &random)
            var node =
                isLeaf
                ? TreeNode.leaf(previous: previous, next: next, keys: keys)
                : TreeNode.branch(
                    children: keys.map {
                        TreeNode.child(UInt64.random(in: 1...999, using: &random), count: UInt64(n), fence: $0)
                    })
            let all = node.entries
            let total = all.reduce(0) { $0 + $1.count }
            var running = 0
            var middle = 0
            while middle < all.count - 1 && running < total / 2 {
                running += all[middle].count
                middle += 1
            }
            middle = max(1, min(middle, all.count - 1))
            let left =
                isLeaf
                ? TreeNode.leaf(previous: previous, next: next, keys: all[..<middle])
                : TreeNode.branch(children: all[..<middle])
            let right =
                isLeaf
                ? TreeNode.leaf(previous: 0, next: 0, keys: all[middle...]) : TreeNode.branch(children: all[middle...])
            let cut = node.splitOff()
            #expect(node.bytes == left.bytes, "trial \(trial): the left half")
            #expect(cut.bytes == right.bytes, "trial \(trial): the right half")
        }
    }

    @Test func prefixLookupFindsTheFirstMatchingKey() throws {
        try withTree { fixture in
            let tree = fixture.tree
            try fixture.write { txn throws in
                for key: [UInt8] in [[1, 2], [1, 3, 0], [1, 3, 5], [2]] { try tree.insert(key, txn) }
                #expect(try tree.firstKey(withPrefix: [1, 3], txn) == [1, 3, 0])
                #expect(try tree.firstKey(withPrefix: [1, 4], txn) == nil)
                #expect(try tree.firstKey(withPrefix: [3], txn) == nil)
            }
        }
    }

    /// A reader scans its leaves where LMDB holds them; a leaf whose header or offsets point
    /// outside its record is a `corrupted` error, not a read out of bounds, and the same scan in a
    /// write (on the node as the write has it) says the same.
    @Test(arguments: [false, true])
    func aDamagedLeafIsAnErrorWhereverItIsScanned(inWrite: Bool) throws {
        try withTree(cached: true) { fixture in
            let tree = fixture.tree
            try fixture.write { txn throws in
                for value in 0..<20 { try tree.insert([UInt8(value), 1, 2, 3], txn) }
            }
            let leaf = try {
                var leaves: [UInt64] = []
                try fixture.read { txn throws in leaves = try tree.nodeIDs(txn).leaves }
                return try #require(leaves.first)
            }()
            let key = TreeNodeCache.NodeKey(tree: 7, node: leaf).bytes
            // An intact leaf first: its 20 keys, forwards and backwards.
            try fixture.read { txn throws in
                var keys: [[UInt8]] = []
                try tree.scan(from: try tree.position(atRank: 0, txn), forward: true, txn) {
                    keys.append(Array($0))
                    return true
                }
                #expect(keys == (0..<20).map { [UInt8($0), 1, 2, 3] })
                keys = []
                try tree.scan(from: try tree.position(atRank: 20, txn), forward: false, txn) {
                    keys.append(Array($0))
                    return true
                }
                #expect(keys == (0..<20).reversed().map { [UInt8($0), 1, 2, 3] })
            }
            let intact = try fixture.environment.read { txn in
                try #require(try txn.get(fixture.database, key)).map { $0 }
            }
            var damaged: [[UInt8]] = []
            // Its entry count far beyond the record.
            var count = intact
            count[1] = 0xFF
            count[2] = 0x7F
            damaged.append(count)
            // The last entry's end past the record (the offsets follow the 19-byte header).
            var offsets = intact
            let last = TreeNode.leafHeaderSize + 2 * 20
            offsets[last] = 0xFF
            offsets[last + 1] = 0x7F
            damaged.append(offsets)
            // Cut short inside the header.
            damaged.append(Array(intact.prefix(10)))
            for bytes in damaged {
                try fixture.environment.write { txn in try txn.put(fixture.database, key, bytes) }
                let scan = { (txn: StoreTransaction) throws in
                    try tree.scan(from: CountedTree.Position(leaf: leaf, index: 0), forward: true, txn) { _ in true }
                }
                if inWrite {
                    #expect(throws: StoreError.self) { try fixture.write { txn throws in try scan(txn) } }
                } else {
                    #expect(throws: StoreError.self) { try fixture.read { txn throws in try scan(txn) } }
                }
            }
        }
    }

    private struct RolledBack: Error {}

    /// Every record a tree reads from LMDB is checked before its bytes are read unchecked: a
    /// damaged header, branch or leaf is a `corrupted` error in every operation that reaches it,
    /// in a reader and in a write (cached or written through), not a trap or a read or write out
    /// of bounds; and the check accepts every record the tree itself writes.
    @Test(arguments: [false, true])
    func aDamagedRecordIsAnErrorWhereverItIsRead(cached: Bool) throws {
        try withTree(cached: cached) { fixture in
            let tree = fixture.tree
            let keys = (0..<600).map { Array(String(format: "%05d", $0 * 2).utf8) + [UInt8](repeating: 7, count: 40) }
            try fixture.write { txn throws in
                for key in keys { #expect(try tree.insert(key, txn)) }
            }
            var branches: [UInt64] = []
            var leaves: [UInt64] = []
            try fixture.read { txn throws in
                (branches, leaves) = try tree.nodeIDs(txn)
                #expect(try tree.structuralProblems(txn).isEmpty)
            }
            let root = try #require(branches.first)
            #expect(leaves.count > 2)
            func record(_ node: UInt64) throws -> (key: [UInt8], bytes: [UInt8]) {
                let key = TreeNodeCache.NodeKey(tree: 7, node: node).bytes
                let bytes = try fixture.environment.read { txn in
                    try #require(try txn.get(fixture.database, key)).map { $0 }
                }
                return (key, bytes)
            }
            // Every record as the tree wrote it passes the check, and the fuzz target's properties.
            for node in branches + leaves + [CountedTree.headerNode] {
                let bytes = try record(node).bytes
                #expect(bytes.withUnsafeBytes { CountedTree.problem(in: $0, node: node) } == nil)
                #expect(bytes.withUnsafeBytes { TreeRecordFuzzing.run($0) } == nil)
            }

            func set(_ u16: Int, at offset: Int, in bytes: inout [UInt8]) {
                bytes[offset] = UInt8(u16 & 0xFF)
                bytes[offset + 1] = UInt8(u16 >> 8)
            }
            let header = try record(CountedTree.headerNode)
            let branch = try record(root)
            let leaf = try record(leaves[1])
            var damages: [(what: String, key: [UInt8], bytes: [UInt8])] = []
            damages.append(("a header cut short", header.key, Array(header.bytes.prefix(10))))
            var tall = header.bytes
            tall[15] = 0x40
            damages.append(("a header of a huge height", header.key, tall))
            damages.append(("a branch of an unknown kind", branch.key, [7] + branch.bytes.dropFirst()))
            damages.append(("a branch taken for a leaf", branch.key, [0] + branch.bytes.dropFirst()))
            var many = branch.bytes
            set(0x7FFF, at: 1, in: &many)
            damages.append(("a branch counting more entries than it holds", branch.key, many))
            let children = Int(branch.bytes[1]) | Int(branch.bytes[2]) << 8
            var short = branch.bytes
            set(8, at: TreeNode.branchHeaderSize + 2, in: &short)
            damages.append(("a branch whose first child is 8 bytes", branch.key, short))
            var backwards = branch.bytes
            set(0, at: TreeNode.branchHeaderSize + 2 * children, in: &backwards)
            damages.append(("a branch whose last entry ends before it starts", branch.key, backwards))
            damages.append(("a branch with bytes after its entries", branch.key, branch.bytes + [0]))
            damages.append(("a branch without children", branch.key, [1, 0, 0, 0, 0]))
            damages.append(("a leaf taken for a branch", leaf.key, [1] + leaf.bytes.dropFirst()))
            var farLeaf = leaf.bytes
            set(0x7FFF, at: TreeNode.leafHeaderSize + 2, in: &farLeaf)
            damages.append(("a leaf whose first key ends past the record", leaf.key, farLeaf))

            let low = keys[100]
            let high = keys[500]
            for damage in damages {
                #expect(damage.bytes.withUnsafeBytes { TreeRecordFuzzing.run($0) } == nil, "\(damage.what)")
                try fixture.environment.write { txn in try txn.put(fixture.database, damage.key, damage.bytes) }
                // Each operation that reaches the record, in a reader and in a write.
                let operations: [(String, writes: Bool, (StoreTransaction) throws -> Void)] = [
                    ("count", false, { _ = try tree.count($0) }),
                    ("position", false, { txn in _ = try tree.position(atRank: 401, txn) }),
                    ("rank", false, { txn in _ = try tree.rank(of: high, txn) }),
                    ("ranks", false, { txn in _ = try tree.ranks(of: low, and: high, txn) }),
                    (
                        "scan", false,
                        { txn in
                            try tree.scan(from: try tree.position(atRank: 0, txn), forward: true, txn) { _ in true }
                        }
                    ),
                    // Writes that succeed are rolled back, so each damage meets the same tree.
                    (
                        "insert", true,
                        { txn in
                            _ = try tree.insert(high + [1], txn)
                            throw RolledBack()
                        }
                    ),
                    (
                        "remove", true,
                        { txn in
                            _ = try tree.remove(high, txn)
                            throw RolledBack()
                        }
                    ),
                ]
                var failed = 0
                for (name, writes, operation) in operations {
                    for inWrite in writes ? [true] : [false, true] {
                        do {
                            if inWrite { try fixture.write(operation) } else { try fixture.read(operation) }
                        } catch is RolledBack {
                        } catch let error as StoreError {
                            guard case .corrupted = error else {
                                Issue.record("\(damage.what), \(name): \(error)")
                                continue
                            }
                            failed += 1
                        }
                    }
                }
                // A damaged header or root is met by every operation; a damaged leaf by some.
                #expect(failed > (damage.key == leaf.key ? 0 : 9), "\(damage.what): \(failed) of 12 operations failed")
                try fixture.environment.write { txn in
                    try txn.put(
                        fixture.database, damage.key,
                        damage.key == header.key ? header.bytes : damage.key == branch.key ? branch.bytes : leaf.bytes)
                }
            }
            try fixture.read { txn throws in
                #expect(try allKeys(tree, txn) == keys)
                #expect(try tree.structuralProblems(txn).isEmpty)
            }
        }
    }

    /// Also when the doomed tree exists only in the write cache (defined and dropped in one batch).
    @Test(arguments: [false, true])
    func destroyRemovesEveryRecordOfTheTreeOnly(cached: Bool) throws {
        try withTree(cached: cached) { fixture in
            try fixture.write { txn throws in
                let doomed = try CountedTree.create(id: 1, txn)
                let kept = try CountedTree.create(id: 2, txn)
                for value in 0..<2000 {
                    let key = Array(String(value).utf8) + [UInt8](repeating: 7, count: 40)
                    try doomed.insert(key, txn)
                    try kept.insert(key, txn)
                }
                try doomed.destroy(txn)
                #expect(try kept.count(txn) == 2000)
                #expect(try kept.structuralProblems(txn) == [])
            }
            try fixture.read { txn throws in
                let records = try recordCount(txn)
                #expect(try CountedTree(id: 2).count(txn) == 2000)
                #expect(try txn.treeNodes(1).isEmpty)
                #expect(try txn.treeNodes(2).count + (try txn.treeNodes(7).count) == records)
            }
        }
    }

    private func recordCount(_ txn: StoreTransaction) throws -> Int {
        var count = 0
        try txn.lmdb.withCursor(txn.trees) { cursor in
            var entry = try cursor.first()
            while entry != nil {
                count += 1
                entry = try cursor.next()
            }
        }
        return count
    }
}

extension Array where Element == [UInt8] {
    func binarySearch(_ key: [UInt8]) -> (index: Int, found: Bool) {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if compareBytes(self[middle], key) < 0 { low = middle + 1 } else { high = middle }
        }
        return (low, low < count && self[low] == key)
    }
}
