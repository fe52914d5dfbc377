import FolioJSON
import FolioModel
import Testing

@testable import FolioStore

/// A reader keeps what its snapshots read of views and trees while the committed state stays the
/// same (`ReadMemo`): every answer must be the one a fresh snapshot gives, whatever commits came
/// between two reads.
@Suite struct ReadMemoTests {
    private func definition(_ name: String, sort: [String]) throws -> ViewDefinition {
        try ViewDefinition(
            name: name, collection: "Item", whereJSON: nil,
            sort: SortOrder(parsing: .array(sort.map { JSON.string($0) })), unique: false)
    }

    /// A reader that keeps its snapshot between reads (as an event loop's does) and one that does
    /// not, against a one-off snapshot, after every step of random writes: creates, updates that
    /// move keys, deletes, and the view dropped and defined again under its name with another
    /// order. The view is large enough for its tree to have branches, which the memo keeps. Pages
    /// of the view, its count, a page of the collection in creation order and one in the view's
    /// order (served by the view only while it has that order).
    @Test func readersAnswerAsAFreshSnapshotAfterEveryCommit() throws {
        try withTemporaryStore { store in
            defer { store.close() }
            let writer = TestWriter(store)
            try writer.execute(.defineView(try definition("ranked", sort: ["rank"])))
            var random = SeededGenerator(seed: 7)
            var live: [String] = []
            try store.write { txn in
                for index in 0..<3000 {
                    _ = try txn.execute(
                        .create(
                            collection: "Item", id: "i\(index)",
                            data: [
                                "rank": .int(Int64.random(in: 0...100_000, using: &random)), "n": .int(Int64(index)),
                            ]),
                        Acceptance(timestamp: Timestamp(milliseconds: 1_000 + Int64(index)), origin: writer.origin),
                        ids: &writer.ids)
                    live.append("i\(index)")
                }
            }
            let keeping = try store.makeReader(keepingSnapshot: true)
            let plain = try store.makeReader()
            defer { keeping.releaseSnapshot() }

            func answers(_ read: ((Snapshot) throws -> [[UInt8]]) throws -> [[UInt8]]) throws -> [[UInt8]] {
                try read { snapshot in
                    var pages: [[UInt8]] = []
                    for offset in [0, 1500, 2990] {
                        let page = try snapshot.run(
                            try Query(source: .view("ranked"), limit: 20, start: .offset(offset)))
                        pages.append(page.items + Array("|\(page.total)".utf8))
                    }
                    pages.append(
                        Array("\(try snapshot.run(try Query(source: .view("ranked")), countOnly: true).total)".utf8))
                    // A collection's creation order (its tree from the catalog), and an order a view
                    // of the collection serves while it is defined so (the collection's views).
                    pages.append(
                        try snapshot.run(try Query(source: .collection("Item"), limit: 20, start: .offset(1000))).items)
                    let byRank = try Query(
                        source: .collection("Item"), whereJSON: nil, sort: SortOrder(parsing: ["rank"]), limit: 20)
                    let ranked = try snapshot.run(byRank)
                    pages.append(ranked.items + Array("\(ranked.plan.source)".utf8))
                    return pages
                }
            }
            func check(_ step: String) throws {
                let fresh = try answers { try store.read($0) }
                // Twice each: the second read of the same state answers from the memo.
                for _ in 0..<2 {
                    #expect(
                        try answers { try keeping.read($0) } == fresh, "a reader keeping its snapshot, after \(step)")
                    #expect(try answers { try plain.read($0) } == fresh, "a reader, after \(step)")
                }
            }

            try check("the first fill")
            for step in 0..<36 {
                switch step % 6 {
                case 0, 1:
                    let id = "new\(step)"
                    _ = try writer.create("Item", ["rank": .int(Int64.random(in: 0...100_000, using: &random))], id: id)
                    live.append(id)
                case 2, 3:
                    let id = live.randomElement(using: &random)!
                    try writer.execute(
                        .update(
                            collection: "Item", id: id, patch: ["rank": .int(-Int64(step))], ops: nil, ifVersion: nil))
                case 4:
                    let id = live.remove(at: Int.random(in: 0..<live.count, using: &random))
                    try writer.execute(.delete(collection: "Item", id: id, ifVersion: nil))
                default:
                    // The same name, another order: a memo of the old view would answer in the old one.
                    try writer.execute(.dropView(name: "ranked"))
                    try writer.execute(.defineView(try definition("ranked", sort: step % 12 == 5 ? ["-rank"] : ["n"])))
                }
                try check("step \(step)")
            }
        }
    }

    /// Only headers and branches are kept, up to `ReadMemo.maxRecordBytes`; a new committed state
    /// empties the memo.
    @Test func theMemoKeepsBranchesAndHeadersWithinItsBound() throws {
        try withTemporaryStore { store in
            defer { store.close() }
            let memo = ReadMemo()
            var reads = 0
            // As many branches as fit beside the 3-byte header read first.
            let fit = (ReadMemo.maxRecordBytes - (3 + ReadMemo.entryOverhead)) / (4096 + ReadMemo.entryOverhead)
            let branch = [TreeNode.branchKind] + [UInt8](repeating: 7, count: 4095)
            let leaf = [UInt8](repeating: 0, count: 100)
            func read(_ node: UInt64, _ record: [UInt8]) -> [UInt8]? {
                memo.treeRecord(TreeNodeCache.NodeKey(tree: 1, node: node)) {
                    reads += 1
                    return record
                }
            }
            try store.read { snapshot in
                memo.enter(snapshot.txn)
                _ = read(1, leaf)
                _ = read(1, leaf)
                #expect(reads == 2, "a leaf is read each time")
                _ = read(CountedTree.headerNode, [1, 2, 3])
                _ = read(CountedTree.headerNode, [1, 2, 3])
                #expect(reads == 3, "a header is kept")
                for node in 0..<UInt64(fit) { _ = read(100 + node, branch) }
                for node in 0..<UInt64(fit) { _ = read(100 + node, branch) }
                #expect(reads == 3 + fit, "branches are kept")
                _ = read(99, branch)
                _ = read(99, branch)
                #expect(reads == 5 + fit, "beyond the bound, a branch is read each time")
            }
            _ = try TestWriter(store).create("Item", ["n": 1])
            try store.read { snapshot in
                memo.enter(snapshot.txn)
                _ = read(CountedTree.headerNode, [1, 2, 3])
                #expect(reads == 6 + fit, "a new committed state starts empty")
            }
        }
    }
    /// A reader's pages share its object keys' and items' heads (`ReadMemo.objectHeads`), set for
    /// the collection of its last page: pages of two collections in turn, by view, in creation
    /// order and by a sorted scan, each name their own collection and objects.
    @Test func pagesOfCollectionsInTurnOnOneReaderNameTheirOwn() throws {
        try withTemporaryStore { store in
            defer { store.close() }
            let writer = TestWriter(store)
            try writer.execute(.defineView(try definition("ranked", sort: ["rank"])))
            for index in 0..<30 {
                try writer.execute(
                    .create(collection: "Item", id: "i\(index)", data: ["rank": .int(Int64(29 - index))]))
                try writer.execute(
                    .create(collection: "Longer_collection_name", id: "o\(index)", data: ["rank": .int(Int64(index))]))
            }
            let reader = try store.makeReader(keepingSnapshot: true)
            defer { reader.releaseSnapshot() }
            func page(_ query: Query) throws -> [(collection: String, id: String)] {
                let result = try reader.read { try $0.run(query) }
                guard case .array(let items) = try JSONParser.parse(Array("[".utf8) + result.items + Array("]".utf8))
                else { return [] }
                return items.compactMap { item in
                    guard let object = item.objectValue, let collection = object["collection"]?.stringValue,
                        let id = object["id"]?.stringValue
                    else { return nil }
                    return (collection, id)
                }
            }
            for round in 0..<3 {
                var byView = try Query(source: .view("ranked"))
                byView.limit = 5
                #expect(
                    try page(byView).map { "\($0.collection)/\($0.id)" } == (25..<30).reversed().map { "Item/i\($0)" },
                    "round \(round)")
                var other = try Query(source: .collection("Longer_collection_name"))
                other.limit = 5
                #expect(
                    try page(other).map { "\($0.collection)/\($0.id)" }
                        == (0..<5).map { "Longer_collection_name/o\($0)" }, "round \(round)")
                var sorted = try Query(source: .collection("Item"), sort: SortOrder(parsing: ["-rank"]))
                sorted.limit = 3
                #expect(
                    try page(sorted).map { "\($0.collection)/\($0.id)" } == ["Item/i0", "Item/i1", "Item/i2"],
                    "round \(round)")
            }
        }
    }
}
