import LMDB
import Testing

@testable import FolioStore

/// A view's tree takes its changes as ops and merges them into its nodes many at a time
/// (`ViewBuffer`): every read must see the ops as if they were in the nodes, in a write (which
/// resolves its own, uncommitted ops) and in snapshots (which share resolutions through the store's
/// `ViewDeltaCache`, built on each other), before and after merges.
@Suite struct BufferedTreeTests {
    private func randomKey(_ random: inout SeededGenerator, maxLength: Int = 12) -> [UInt8] {
        (0..<Int.random(in: 1...maxLength, using: &random)).map { _ in UInt8.random(in: 0...5, using: &random) }
    }

    /// Everything a reader asks a tree, against the sorted array it should equal.
    private func check(
        _ tree: CountedTree, _ model: [[UInt8]], _ txn: StoreTransaction, _ random: inout SeededGenerator
    ) throws {
        #expect(try tree.count(txn) == model.count)
        var all: [[UInt8]] = []
        try tree.forEach(txn) { all.append(Array($0)) }
        #expect(all == model)
        var iterator = try CountedTree.KeyIterator(tree, txn)
        var iterated: [[UInt8]] = []
        while let key = try iterator.next() { iterated.append(key) }
        #expect(iterated == model)
        for rank in Set((0..<40).map { _ in Int.random(in: 0...model.count, using: &random) } + [0, model.count]) {
            var page: [[UInt8]] = []
            try tree.scan(from: try tree.position(atRank: rank, txn), forward: true, txn) {
                page.append(Array($0))
                return page.count < 3
            }
            #expect(
                page == Array(model[min(rank, model.count)..<min(model.count, rank + 3)]),
                "page at rank \(rank) of \(model.count)")
            var backwards: [[UInt8]] = []
            try tree.scan(from: try tree.position(atRank: rank, txn), forward: false, txn) {
                backwards.append(Array($0))
                return backwards.count < 3
            }
            #expect(backwards == Array(model[max(0, rank - 3)..<rank].reversed()), "page before rank \(rank)")
        }
        for _ in 0..<30 {
            let probe = randomKey(&random)
            let (index, found) = model.binarySearch(probe)
            #expect(try tree.rank(of: probe, txn) == index)
            #expect(try tree.rank(of: probe, inclusive: true, txn) == index + (found ? 1 : 0))
            let other = randomKey(&random)
            let (low, high) = compareBytes(probe, other) <= 0 ? (probe, other) : (other, probe)
            let pair = try tree.ranks(of: low, and: high, txn)
            #expect(pair.low == model.binarySearch(low).index && pair.high == model.binarySearch(high).index)
            for strictly in [false, true] {
                var after: [[UInt8]] = []
                try tree.scan(from: try tree.position(of: probe, strictly: strictly, txn), forward: true, txn) {
                    after.append(Array($0))
                    return after.count < 2
                }
                let start = strictly && found ? index + 1 : index
                #expect(after == Array(model[start..<min(model.count, start + 2)]))
                var before: [[UInt8]] = []
                try tree.scan(from: try tree.position(of: probe, strictly: strictly, txn), forward: false, txn) {
                    before.append(Array($0))
                    return before.count < 2
                }
                #expect(before == Array(model[max(0, start - 2)..<start].reversed()))
            }
            let prefix = Array(probe.prefix(2))
            #expect(try tree.firstKey(withPrefix: prefix, txn) == model.first { $0.starts(with: prefix) })
        }
        #expect(try tree.structuralProblems(txn) == [])
    }

    /// `count` more ops, one a write: op `next` goes into `trees[which(next)]` with key `key(next)`,
    /// and into its model; then every tree is checked against its model, and what each tree's
    /// nodes hold and the stream's state are returned.
    private func writeOps(
        _ count: Int, _ next: inout Int, _ trees: [CountedTree], _ models: inout [[[UInt8]]], which: (Int) -> Int,
        key: (Int) -> [UInt8],
        _ environment: Environment, _ database: Database, _ ops: ViewStreamDatabases, _ deltas: ViewDeltaCache
    ) throws -> (nodes: [Int], state: BufferState) {
        for _ in 0..<count {
            let roundOps = try environment.write { lmdb in
                let txn = StoreTransaction(
                    lmdb: lmdb, trees: database, cache: TreeNodeCache(parent: nil), deltas: deltas, viewOps: ops)
                let (tree, opKey) = (which(next), key(next))
                try trees[tree].insert(opKey, txn)
                models[tree].insert(opKey, at: models[tree].binarySearch(opKey).index)
                try txn.flushTrees()
                return txn.cache?.roundOpsChange
            }
            // As `Store.write` does once a write commits: a round's ops read by a turn serve the next.
            if let roundOps { deltas.setRoundOps(roundOps) }
            next += 1
        }
        let written = next
        let checked = models
        return try environment.read { lmdb in
            let txn = StoreTransaction(lmdb: lmdb, trees: database, cache: nil, deltas: deltas, viewOps: ops)
            var random = SeededGenerator(seed: UInt64(written))
            for (tree, model) in zip(trees, checked) { try check(tree, model, txn, &random) }
            return (try trees.map { try $0.nodeCount(txn) }, try ViewBuffer.state(txn))
        }
    }

    /// A fresh LMDB environment in a temporary directory, with the databases of trees and of view ops.
    private func withTreeDatabases(_ body: (Environment, Database, ViewStreamDatabases) throws -> Void) throws {
        try withTemporaryDirectory { path in
            let environment = try Environment(path: path)
            try body(
                environment, try environment.openDatabase("trees"),
                ViewStreamDatabases(ops: try environment.openDatabase("viewops"), main: try environment.mainDatabase()))
        }
    }

    /// With a limit (0: the default, which these writes never reach), merge rounds start on their
    /// own too, and reads meet them between turns.
    @Test(arguments: zip([UInt64(1), 2, 3, 4, 5, 6], [0, 0, 25, 60, 150, 150]))
    func opsReadAsIfMergedInEveryTransaction(seed: UInt64, limit: Int) throws {
        try ViewBuffer.$limitOverride.withValue(limit == 0 ? nil : limit) {
            try opsReadAsIfMerged(seed: seed, limit: limit)
        }
    }

    private func opsReadAsIfMerged(seed: UInt64, limit: Int) throws {
        try withTreeDatabases { environment, database, ops in
            let deltas = ViewDeltaCache()
            // Two views' trees, whose ops share the stream.
            let trees = try environment.write { lmdb in
                let txn = StoreTransaction(lmdb: lmdb, trees: database, cache: nil, viewOps: ops)
                return [
                    try CountedTree.create(id: 3, buffered: true, txn),
                    try CountedTree.create(id: 4, buffered: true, txn),
                ]
            }
            var random = SeededGenerator(seed: seed)
            var models: [[[UInt8]]] = [[], []]
            var merges = 0
            func checkAll(_ expected: [[[UInt8]]], _ txn: StoreTransaction) throws {
                for (tree, model) in zip(trees, expected) { try check(tree, model, txn, &random) }
            }
            for round in 0..<30 {
                // Some rounds' writes fail after their ops: nothing of them may remain, in the
                // nodes, the ops or the resolutions.
                let failing = Int.random(in: 0..<6, using: &random) == 0
                var written = models
                do {
                    try environment.write { lmdb in
                        let txn = StoreTransaction(
                            lmdb: lmdb, trees: database, cache: TreeNodeCache(parent: nil), deltas: deltas, viewOps: ops
                        )
                        for _ in 0..<Int.random(in: 1...250, using: &random) {
                            let which = Int.random(in: 0..<10, using: &random) < 7 ? 0 : 1
                            let tree = trees[which]
                            let removing =
                                round >= 22
                                ? Int.random(in: 0..<10, using: &random) < 7
                                : Int.random(in: 0..<10, using: &random) < 4
                            if removing, !written[which].isEmpty {
                                try tree.remove(
                                    written[which].remove(at: Int.random(in: 0..<written[which].count, using: &random)),
                                    txn)
                            } else {
                                let key = randomKey(&random, maxLength: 40)
                                let (index, found) = written[which].binarySearch(key)
                                if !found {
                                    try tree.insert(key, txn)
                                    written[which].insert(key, at: index)
                                }
                            }
                            if Int.random(in: 0..<300, using: &random) == 0 {
                                // Either way of taking the changes, or the one the merge picks.
                                try tree.merge(txn, rebuilding: [true, false, nil].randomElement(using: &random)!)
                                merges += 1
                            }
                            if Int.random(in: 0..<100, using: &random) == 0 { try checkAll(written, txn) }
                        }
                        try txn.flushTrees()
                        if failing { throw StoreError.invalid("this write fails") }
                    }
                    models = written
                } catch StoreError.invalid {
                    #expect(failing)
                }
                // Two snapshots in turn: the second builds on what the first kept.
                for _ in 0..<2 {
                    try environment.read { lmdb in
                        try checkAll(
                            models,
                            StoreTransaction(lmdb: lmdb, trees: database, cache: nil, deltas: deltas, viewOps: ops))
                    }
                }
                // And one that shares nothing.
                try environment.read { lmdb in
                    try checkAll(
                        models,
                        StoreTransaction(
                            lmdb: lmdb, trees: database, cache: nil, deltas: ViewDeltaCache(), viewOps: ops))
                }
            }
            #expect(merges > 3)
            try environment.write { lmdb in
                let txn = StoreTransaction(
                    lmdb: lmdb, trees: database, cache: TreeNodeCache(parent: nil), deltas: deltas, viewOps: ops)
                try trees[0].merge(txn)
                try txn.flushTrees()
            }
            try environment.read { lmdb in
                let txn = StoreTransaction(lmdb: lmdb, trees: database, cache: nil, deltas: deltas, viewOps: ops)
                try checkAll(models, txn)
                // Merged: no op is left, only the stream's state.
                #expect(try txn.lmdb.statistics(ops.ops).entries == 0, "no op is left")
                #expect(try ViewBuffer.state(txn).pending == 0)
                // More merges than those asked for (some of which were rolled back): rounds ran.
                if limit > 0 { #expect(try ViewBuffer.state(txn).epoch > UInt64(merges + 1)) }
            }
        }
    }

    /// Once the limit is reached a round merges one tree a turn, a turn every `turnGap` ops: a
    /// merged tree's ops after the round's end stay pending while the next trees still have all
    /// theirs, reads see every key throughout, and after the last turn the stream holds only the
    /// ops after the end.
    @Test func aRoundMergesOneTreeATurn() throws {
        try ViewBuffer.$limitOverride.withValue(60) {
            try withTreeDatabases { environment, database, ops in
                let trees = try environment.write { lmdb in
                    let txn = StoreTransaction(lmdb: lmdb, trees: database, cache: nil, viewOps: ops)
                    return try (1...3).map { try CountedTree.create(id: UInt32($0), buffered: true, txn) }
                }
                #expect(ViewBuffer.turnGap(trees: 3) == 1 && ViewBuffer.chunk == 15)
                let deltas = ViewDeltaCache()
                var models: [[[UInt8]]] = [[], [], []]
                var next = 0
                // `count` more ops, one a write, round robin over the trees.
                func write(_ count: Int) throws -> (nodes: [Int], state: BufferState) {
                    try writeOps(
                        count, &next, trees, &models, which: { $0 % 3 }, key: { [UInt8($0 % 7), UInt8($0 / 7)] },
                        environment, database, ops, deltas)
                }
                var (nodes, state) = try write(59)
                #expect(nodes == [0, 0, 0] && state.round == nil && state.pending == 59)
                (nodes, state) = try write(1)
                #expect(nodes == [20, 0, 0], "the first turn merges the first tree alone")
                #expect(state.round == MergeRound(end: 60, done: 1, trees: [1, 2, 3], turns: 1, chunk: 15))
                #expect(state.since(of: 1) == 60 && state.since(of: 2) == 0)
                (nodes, state) = try write(1)
                #expect(
                    nodes == [20, 20, 0] && state.round?.done == 2, "the second turn, an op later: op 60 stays pending")
                (nodes, state) = try write(1)
                #expect(nodes == [20, 20, 20])
                #expect(state.round == nil && state.firstOp == 60 && state.nextOp == 62 && state.epoch == 1)
                #expect(state.counts.map(\.tree) == [1, 2], "the trees with ops after the end")
                let entries = try environment.read { lmdb in try lmdb.statistics(ops.ops).entries }
                #expect(entries == 1, "ops 60 ..< 62, put back in one record")
                (nodes, state) = try write(58)
                #expect(
                    state.round == MergeRound(end: 120, done: 1, trees: [1, 2, 3], turns: 1, chunk: 15)
                        && nodes == [40, 20, 20])
                (nodes, state) = try write(2)
                #expect(state.round == nil && nodes == [40, 40, 40] && state.firstOp == 120 && state.pending == 2)
            }
        }
    }

    /// A big tree (`ViewBuffer.bigTree` keys) takes its ops a chunk a turn: its `since` moves
    /// through the round chunk by chunk, and reads see every key at every step; a small tree
    /// takes all of its in its turn.
    @Test func aBigTreeTakesItsOpsAChunkATurn() throws {
        // The fill under the default limit, whatever FOLIO_VIEW_BUFFER says; the round under 40.
        try ViewBuffer.$limitOverride.withValue(65536) { try bigTreeInChunks() }
    }

    private func bigTreeInChunks() throws {
        try withTreeDatabases { environment, database, ops in
            let deltas = ViewDeltaCache()
            // A big tree of 330 keys in its nodes and a small one, empty.
            let fill: [[UInt8]] = (0..<330).map { [1, UInt8($0 / 256), UInt8($0 % 256)] }
            let trees = try environment.write { lmdb in
                let txn = StoreTransaction(
                    lmdb: lmdb, trees: database, cache: TreeNodeCache(parent: nil), deltas: deltas, viewOps: ops)
                let trees = [
                    try CountedTree.create(id: 1, buffered: true, txn),
                    try CountedTree.create(id: 2, buffered: true, txn),
                ]
                for key in fill { try trees[0].insert(key, txn) }
                try trees[0].merge(txn)
                try txn.flushTrees()
                return trees
            }
            var models: [[[UInt8]]] = [fill, []]
            try ViewBuffer.$limitOverride.withValue(40) {
                #expect(ViewBuffer.bigTree == 160 && ViewBuffer.chunk == 10 && ViewBuffer.turnGap(trees: 2) == 1)
                var next = 0
                // `count` more ops, one a write (keys 2, n): three in four into the big tree.
                func write(_ count: Int) throws -> (nodes: [Int], state: BufferState) {
                    try writeOps(
                        count, &next, trees, &models, which: { $0 % 4 == 3 ? 1 : 0 }, key: { [2, UInt8($0)] },
                        environment, database, ops, deltas)
                }
                // The fill's merge left the stream at op 330. Ops 330 ..< 370: 30 of the big tree
                // (330 + n, n % 4 != 3), 10 of the small one; the big tree's first chunk is its first
                // 10, up to 342.
                var (nodes, state) = try write(40)
                #expect(nodes == [340, 0])
                #expect(state.round == MergeRound(end: 370, done: 0, trees: [1, 2], turns: 1, chunk: 10, partial: 343))
                #expect(state.since(of: 1) == 343 && state.since(of: 2) == 330)
                (nodes, state) = try write(1)
                #expect(nodes == [350, 0] && state.round?.partial == 356 && state.since(of: 1) == 356)
                (nodes, state) = try write(1)
                #expect(
                    nodes == [360, 0] && state.round?.done == 1 && state.round?.partial == nil,
                    "the last chunk: none left")
                #expect(state.since(of: 1) == 370 && state.since(of: 2) == 330)
                (nodes, state) = try write(1)
                #expect(nodes == [360, 10], "the small tree takes all its ops in one turn")
                #expect(state.round == nil && state.firstOp == 370 && state.pending == 3 && state.epoch == 2)
            }
        }
    }

    /// A merge round in the stream's state reads back as written, and one written by a foliod of
    /// store format 6 (no turns, chunk or partial) reads as a round whose trees take their ops whole.
    @Test func roundsOfBothFormatsRead() throws {
        var state = BufferState()
        state.epoch = 3
        state.firstOp = 100
        state.nextOp = 180
        state.counts = [(1, 50), (4, 7)]
        state.round = MergeRound(end: 170, done: 1, trees: [1, 4], turns: 3, chunk: 8, partial: 150)
        var read = try BufferState(state.bytes)
        #expect(read.round == state.round && read.epoch == 3 && read.firstOp == 100 && read.nextOp == 180)
        #expect(read.counts.map(\.tree) == [1, 4] && read.counts.map(\.count) == [50, 7])
        state.round?.partial = nil
        #expect(try BufferState(state.bytes).round == state.round)
        // Format 6: UInt64.max, epoch, firstOp, nextOp, end, done, trees' count, trees, counts.
        var bytes: [UInt8] = []
        for value: UInt64 in [.max, 3, 100, 180, 170] { bytes.appendLittleEndian(value) }
        for value: UInt32 in [1, 2, 1, 4] { bytes.appendLittleEndian(value) }
        for (tree, count): (UInt32, UInt64) in [(1, 50), (4, 7)] {
            bytes.appendLittleEndian(tree)
            bytes.appendLittleEndian(count)
        }
        read = try BufferState(bytes)
        #expect(read.round == MergeRound(end: 170, done: 1, trees: [1, 4], turns: 1, chunk: 0, partial: nil))
        #expect(read.counts.map(\.count) == [50, 7] && read.nextOp == 180)
    }

    /// In a write the stream's state is read from LMDB once and stored when the write ends: LMDB
    /// holds the state of the last write until then. A nested write's changes to it join its
    /// parent's when it commits and are gone when it fails, with its ops.
    /// A write's view ops go into LMDB as one record when it ends; a read of the stream in the
    /// write, and a nested write's beginning and end, put the ops held so far first; a nested
    /// write that fails leaves none of its own. Every op is read back in order.
    @Test func aWritesOpsGoIntoOneRecord() throws {
        try ViewBuffer.$limitOverride.withValue(65536) {
            try withTreeDatabases { environment, database, ops in
                func records(_ lmdb: Transaction) throws -> [UInt64] {
                    var keys: [UInt64] = []
                    try lmdb.withCursor(ops.ops) { cursor in
                        var entry = try cursor.first()
                        while let (key, _) = entry {
                            keys.append(UInt64(bigEndian: key.loadUnaligned(as: UInt64.self)))
                            entry = try cursor.next()
                        }
                    }
                    return keys
                }
                let trees = try environment.write { lmdb in
                    let txn = StoreTransaction(
                        lmdb: lmdb, trees: database, cache: TreeNodeCache(parent: nil), viewOps: ops)
                    let trees = [
                        try CountedTree.create(id: 1, buffered: true, txn),
                        try CountedTree.create(id: 2, buffered: true, txn),
                    ]
                    for key: UInt8 in 0..<3 {
                        try trees[0].insert([key], txn)
                        try trees[1].insert([key], txn)
                    }
                    #expect(try records(lmdb) == [], "held until the write ends")
                    try txn.flushTrees()
                    #expect(try records(lmdb) == [0], "six ops, one record")
                    return trees
                }
                try environment.write { lmdb in
                    let txn = StoreTransaction(
                        lmdb: lmdb, trees: database, cache: TreeNodeCache(parent: nil), viewOps: ops)
                    try trees[0].insert([10], txn)
                    // Reading the tree reads its ops: the one held goes in first.
                    var keys: [[UInt8]] = []
                    try trees[0].forEach(txn) { keys.append(Array($0)) }
                    #expect(keys == [[0], [1], [2], [10]])
                    #expect(try records(lmdb) == [0, 6])
                    try trees[0].insert([11], txn)
                    try txn.nestedWrite { nested in
                        try trees[1].insert([10], nested)
                        try trees[1].remove([0], nested)
                    }
                    struct Refused: Error {}
                    #expect(throws: Refused.self) {
                        try txn.nestedWrite { nested in
                            try trees[0].insert([12], nested)
                            throw Refused()
                        }
                    }
                    try trees[1].insert([11], txn)
                    try txn.flushTrees()
                    #expect(try records(lmdb) == [0, 6, 7, 8, 10])
                }
                try environment.read { lmdb in
                    let txn = StoreTransaction(lmdb: lmdb, trees: database, cache: nil, viewOps: ops)
                    #expect(try ViewBuffer.state(txn).nextOp == 11)
                    var written: [(UInt64, UInt32, Bool, [UInt8])] = []
                    try ViewBuffer.forEachOp(0..<11, txn) { written.append(($0, $1, $2, $3)) }
                    let expected: [(UInt64, UInt32, Bool, [UInt8])] = [
                        (0, 1, true, [0]), (1, 2, true, [0]), (2, 1, true, [1]), (3, 2, true, [1]), (4, 1, true, [2]),
                        (5, 2, true, [2]),
                        (6, 1, true, [10]), (7, 1, true, [11]), (8, 2, true, [10]), (9, 2, false, [0]),
                        (10, 2, true, [11]),
                    ]
                    #expect(written.map(\.0) == expected.map(\.0) && written.map(\.1) == expected.map(\.1))
                    #expect(written.map(\.2) == expected.map(\.2) && written.map(\.3) == expected.map(\.3))
                    // A range that begins inside a record.
                    var later: [UInt64] = []
                    try ViewBuffer.forEachOp(3..<9, txn) { number, _, _, _ in later.append(number) }
                    #expect(later == [3, 4, 5, 6, 7, 8])
                    var keys: [[UInt8]] = []
                    try trees[1].forEach(txn) { keys.append(Array($0)) }
                    #expect(keys == [[1], [2], [10], [11]])
                }
            }
        }
    }

    @Test func aWriteStoresTheStreamsStateOnceWhenItEnds() throws {
        // The default limit, which these writes do not reach, whatever FOLIO_VIEW_BUFFER says.
        try ViewBuffer.$limitOverride.withValue(65536) { try stateStoredOnce() }
    }

    private func stateStoredOnce() throws {
        try withTreeDatabases { environment, database, ops in
            func stored(_ lmdb: Transaction) throws -> BufferState? {
                try lmdb.get(ops.main, ViewBuffer.stateKey).map { try BufferState(Array($0)) }
            }
            let trees = try environment.write { lmdb in
                let txn = StoreTransaction(lmdb: lmdb, trees: database, cache: TreeNodeCache(parent: nil), viewOps: ops)
                let trees = [
                    try CountedTree.create(id: 1, buffered: true, txn),
                    try CountedTree.create(id: 2, buffered: true, txn),
                ]
                for key: UInt8 in 0..<4 {
                    try trees[0].insert([key], txn)
                    try trees[1].insert([key], txn)
                }
                #expect(try stored(lmdb) == nil, "not stored before the write ends")
                #expect(try ViewBuffer.state(txn).nextOp == 8)
                try txn.flushTrees()
                let state = try stored(lmdb)
                #expect(state?.nextOp == 8 && state?.counts.map(\.count) == [4, 4])
                return trees
            }
            try environment.write { lmdb in
                let txn = StoreTransaction(lmdb: lmdb, trees: database, cache: TreeNodeCache(parent: nil), viewOps: ops)
                try trees[0].insert([10], txn)
                // A nested write that commits, and one that fails after its inserts.
                try txn.nestedWrite { nested in
                    try trees[1].insert([10], nested)
                }
                struct Refused: Error {}
                #expect(throws: Refused.self) {
                    try txn.nestedWrite { nested in
                        try trees[0].insert([11], nested)
                        try trees[1].insert([11], nested)
                        #expect(try ViewBuffer.state(nested).nextOp == 12)
                        throw Refused()
                    }
                }
                let state = try ViewBuffer.state(txn)
                #expect(state.nextOp == 10 && state.counts.map(\.count) == [5, 5])
                #expect(try stored(lmdb)?.nextOp == 8, "the last write's state until this one ends")
                var keys: [[UInt8]] = []
                try trees[0].forEach(txn) { keys.append(Array($0)) }
                #expect(keys == [[0], [1], [2], [3], [10]])
                try txn.flushTrees()
                #expect(try stored(lmdb)?.nextOp == 10)
            }
            try environment.read { lmdb in
                let txn = StoreTransaction(lmdb: lmdb, trees: database, cache: nil, viewOps: ops)
                #expect(try ViewBuffer.state(txn).nextOp == 10)
                var keys: [[UInt8]] = []
                try trees[1].forEach(txn) { keys.append(Array($0)) }
                #expect(keys == [[0], [1], [2], [3], [10]])
                #expect(try trees[1].count(txn) == 5)
            }
        }
    }

    /// A dropped view's ops stay in the stream until the next merge, which leaves them out; the
    /// other views' ops are merged as ever.
    @Test func aDroppedTreesOpsAreLeftOutOfTheMerge() throws {
        try withTreeDatabases { environment, database, ops in
            try environment.write { lmdb in
                let txn = StoreTransaction(lmdb: lmdb, trees: database, cache: TreeNodeCache(parent: nil), viewOps: ops)
                let kept = try CountedTree.create(id: 1, buffered: true, txn)
                let dropped = try CountedTree.create(id: 2, buffered: true, txn)
                for key: UInt8 in 0..<10 {
                    try kept.insert([key], txn)
                    try dropped.insert([key], txn)
                }
                try dropped.destroy(txn)
                #expect(try ViewBuffer.state(txn).counts.map(\.tree) == [1])
                try kept.merge(txn)
                #expect(try kept.count(txn) == 10)
                #expect(try txn.treeNodes(2).isEmpty)
                #expect(try txn.lmdb.statistics(ops.ops).entries == 0, "the ops are gone")
                #expect(try kept.structuralProblems(txn) == [])
                try txn.flushTrees()
                #expect(
                    try txn.lmdb.statistics(ops.ops).entries == 0 && txn.lmdb.get(ops.main, ViewBuffer.stateKey) != nil,
                    "only the stream's state is left")
            }
        }
    }

    /// A merge that writes a tree anew (`rebuild`) and one that takes the changes a leaf at a time
    /// give the same keys; the rebuilt tree is sound (links, fences, counts), every record of it is
    /// a node reached from its root, and it keeps working when ops and merges of either kind
    /// follow. Trees of many leaves and few, with long keys (few a leaf) and short, emptied and
    /// refilled.
    @Test(arguments: [UInt64(11), 12, 13, 14])
    func aRebuildingMergeEqualsALeafByLeafOne(seed: UInt64) throws {
        try withTreeDatabases { environment, database, ops in
            var random = SeededGenerator(seed: seed)
            // Tree 1 always rebuilds, tree 2 never; both take the same ops.
            let (rebuilt, stepped) = try environment.write { lmdb in
                let txn = StoreTransaction(lmdb: lmdb, trees: database, cache: TreeNodeCache(parent: nil), viewOps: ops)
                let trees = (
                    try CountedTree.create(id: 1, buffered: true, txn),
                    try CountedTree.create(id: 2, buffered: true, txn)
                )
                try txn.flushTrees()
                return trees
            }
            var model: [[UInt8]] = []
            for round in 0..<14 {
                let maxLength = round % 3 == 0 ? 400 : 24
                try environment.write { lmdb in
                    let txn = StoreTransaction(
                        lmdb: lmdb, trees: database, cache: TreeNodeCache(parent: nil), viewOps: ops)
                    // Rounds 5 and 10 empty the tree; others add, remove, or both.
                    let removing = round == 5 || round == 10 ? 1.0 : [0.0, 0.3, 0.7].randomElement(using: &random)!
                    for _ in 0..<(round == 5 || round == 10 ? model.count : Int.random(in: 1...1500, using: &random)) {
                        if !model.isEmpty, Double.random(in: 0..<1, using: &random) < removing {
                            let key = model.remove(at: Int.random(in: 0..<model.count, using: &random))
                            try rebuilt.remove(key, txn)
                            try stepped.remove(key, txn)
                        } else {
                            let key = randomKey(&random, maxLength: maxLength)
                            let (index, found) = model.binarySearch(key)
                            guard !found else { continue }
                            model.insert(key, at: index)
                            try rebuilt.insert(key, txn)
                            try stepped.insert(key, txn)
                        }
                    }
                    try CountedTree.mergeAll(txn) { $0 == rebuilt.id }
                    // Every record of each tree is a node reached from its root, or its header.
                    for tree in [rebuilt, stepped] {
                        let nodes = try tree.nodeIDs(txn)
                        #expect(
                            try txn.treeNodes(tree.id) == Set(nodes.branches + nodes.leaves + [CountedTree.headerNode]))
                    }
                    try txn.flushTrees()
                }
                try environment.read { lmdb in
                    let txn = StoreTransaction(
                        lmdb: lmdb, trees: database, cache: nil, deltas: ViewDeltaCache(), viewOps: ops)
                    try check(rebuilt, model, txn, &random)
                    try check(stepped, model, txn, &random)
                }
            }
        }
    }

    /// A resolution built op by op on the one before (segments copied only where ops land) equals
    /// one built from all the ops at once and the model's key-by-key state, with keys touched again
    /// and again (a segment's first and last keys too).
    @Test(arguments: [UInt64(7), 8, 9])
    func aResolutionBuiltInStepsEqualsOneBuiltAtOnce(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        var ops: [(insert: Bool, key: [UInt8])] = []
        var inTree: [[UInt8]: Bool] = [:]
        var present: [[UInt8]: Bool] = [:]
        var stepped: BufferedDelta?
        for _ in 0..<300 {
            var step: [(insert: Bool, key: [UInt8])] = []
            for _ in 0..<Int.random(in: 1...12, using: &random) {
                let key = [UInt8.random(in: 0...40, using: &random), UInt8.random(in: 0...9, using: &random)]
                // An op must be possible: insert what the view lacks, remove what it holds.
                let holds = present[key] ?? (Bool.random(using: &random))
                if inTree[key] == nil { inTree[key] = holds }
                present[key] = !holds
                step.append((!holds, key))
            }
            ops += step
            stepped = try BufferedDelta.building(
                on: stepped, since: 0, nextOp: UInt64(ops.count), ops: step, rank: { $0.count })
            let whole = try BufferedDelta.building(on: nil, since: 0, nextOp: UInt64(ops.count), ops: ops, rank: nil)
            let expected = inTree.keys.sorted { compareBytes($0, $1) < 0 }.filter { inTree[$0] != present[$0] }
            for delta in [stepped!, whole] {
                let changes = delta.allChanges
                #expect(changes.map(\.key) == expected)
                #expect(changes.allSatisfy { $0.added == present[$0.key] })
                #expect(delta.changeCount == expected.count)
                #expect(delta.netChange == changes.filter(\.added).count - changes.filter { !$0.added }.count)
                for index in 0..<delta.changeCount {
                    #expect(delta.change(index).key == changes[index].key)
                    #expect(delta.addedBefore(index) == changes[..<index].filter(\.added).count)
                }
                for _ in 0..<5 {
                    let probe = [UInt8.random(in: 0...41, using: &random), UInt8.random(in: 0...10, using: &random)]
                    #expect(
                        delta.lowerBound(probe) == changes.firstIndex { compareBytes($0.key, probe) >= 0 }
                            ?? changes.count)
                    #expect(
                        delta.lowerBound(probe, strictly: true) == changes.firstIndex {
                            compareBytes($0.key, probe) > 0
                        } ?? changes.count)
                }
            }
            // A merge's changes, worked out without segments.
            let net = BufferedDelta.netChanges(ops)
            #expect(net.map(\.key) == expected && net.allSatisfy { $0.added == present[$0.key] })
            #expect(stepped!.allChanges.allSatisfy { $0.treeRank == $0.key.count })
            #expect(
                stepped!.segments.allSatisfy {
                    !$0.entries.isEmpty && $0.entries.count <= 2 * BufferedDelta.segmentLimit
                })
        }
        #expect(stepped!.segments.count > 3)
    }
}
