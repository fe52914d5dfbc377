import LMDB
import Testing

@testable import FolioStore

/// A view's tree takes its changes as ops and merges them into its nodes many at a time
/// (`ViewBuffer`): every read must see the ops as if they were in the nodes, in a write (which
/// resolves its own, uncommitted ops) and in snapshots (which share resolutions through the store's
/// `ViewDeltaCache`, built on each other), before and after merges.
@Suite struct BufferedTreeTests {
    private func randomKey(_ random: inout SeededGenerator) -> [UInt8] {
        (0..<Int.random(in: 1...12, using: &random)).map { _ in UInt8.random(in: 0...5, using: &random) }
    }

    /// Everything a reader asks a tree, against the sorted array it should equal.
    private func check(_ tree: CountedTree, _ model: [[UInt8]], _ txn: StoreTransaction, _ random: inout SeededGenerator) throws {
        #expect(try tree.count(txn) == model.count)
        var all: [[UInt8]] = []
        try tree.forEach(txn) { all.append(Array($0)) }
        #expect(all == model)
        var iterator = try CountedTree.KeyIterator(tree, txn)
        var iterated: [[UInt8]] = []
        while let key = try iterator.next() { iterated.append(key) }
        #expect(iterated == model)
        for rank in 0...model.count {
            var page: [[UInt8]] = []
            try tree.scan(from: try tree.position(atRank: rank, txn), forward: true, txn) {
                page.append(Array($0))
                return page.count < 3
            }
            #expect(page == Array(model[min(rank, model.count)..<min(model.count, rank + 3)]), "page at rank \(rank) of \(model.count)")
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

    @Test(arguments: [UInt64(1), 2, 3, 4])
    func opsReadAsIfMergedInEveryTransaction(seed: UInt64) throws {
        try withTemporaryDirectory { path in
            let environment = try Environment(path: path)
            let database = try environment.openDatabase("trees")
            let deltas = ViewDeltaCache()
            let tree = try environment.write { lmdb in
                try CountedTree.create(id: 3, buffered: true, StoreTransaction(lmdb: lmdb, trees: database, cache: nil))
            }
            var random = SeededGenerator(seed: seed)
            var model: [[UInt8]] = []
            var merges = 0
            for round in 0..<30 {
                // Some rounds' writes fail after their ops: nothing of them may remain, in the
                // nodes, the ops or the resolutions.
                let failing = Int.random(in: 0..<6, using: &random) == 0
                var written = model
                do {
                    try environment.write { lmdb in
                        let txn = StoreTransaction(lmdb: lmdb, trees: database, cache: TreeNodeCache(parent: nil), deltas: deltas)
                        for _ in 0..<Int.random(in: 1...60, using: &random) {
                            let removing = round >= 22 ? Int.random(in: 0..<10, using: &random) < 7 : Int.random(in: 0..<10, using: &random) < 4
                            if removing, !written.isEmpty {
                                try tree.remove(written.remove(at: Int.random(in: 0..<written.count, using: &random)), txn)
                            } else {
                                let key = randomKey(&random)
                                let (index, found) = written.binarySearch(key)
                                if !found {
                                    try tree.insert(key, txn)
                                    written.insert(key, at: index)
                                }
                            }
                            if Int.random(in: 0..<40, using: &random) == 0 {
                                try tree.merge(txn)
                                merges += 1
                            }
                            if Int.random(in: 0..<8, using: &random) == 0 { try check(tree, written, txn, &random) }
                        }
                        try txn.flushTrees()
                        if failing { throw StoreError.invalid("this write fails") }
                    }
                    model = written
                } catch StoreError.invalid {
                    #expect(failing)
                }
                // Two snapshots in turn: the second builds on what the first kept.
                for _ in 0..<2 {
                    try environment.read { lmdb in try check(tree, model, StoreTransaction(lmdb: lmdb, trees: database, cache: nil, deltas: deltas), &random) }
                }
                // And one that shares nothing.
                try environment.read { lmdb in try check(tree, model, StoreTransaction(lmdb: lmdb, trees: database, cache: nil, deltas: ViewDeltaCache()), &random) }
            }
            #expect(merges > 0)
            try environment.write { lmdb in
                let txn = StoreTransaction(lmdb: lmdb, trees: database, cache: TreeNodeCache(parent: nil), deltas: deltas)
                try tree.merge(txn)
                try txn.flushTrees()
            }
            try environment.read { lmdb in
                let txn = StoreTransaction(lmdb: lmdb, trees: database, cache: nil, deltas: deltas)
                try check(tree, model, txn, &random)
                // Merged: no op records are left, only nodes and the header.
                #expect(try txn.treeNodes(tree.id).allSatisfy { $0 < ViewBuffer.opBase || $0 == UInt64.max })
            }
        }
    }
}
