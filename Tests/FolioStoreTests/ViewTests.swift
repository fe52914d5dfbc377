import FolioJSON
import FolioModel
import Testing

@testable import FolioStore

@Suite struct ViewTests {
    /// What a query should return, computed the plain way: every object, filter, sort by key.
    private func expected(_ store: Store, collection: String, filter: Filter?, sort: SortOrder) throws -> [String] {
        try store.read { snapshot in
            var matches: [(key: [UInt8], id: String)] = []
            try snapshot.objects.forEach(in: collection, snapshot.txn) { object in
                if filter?.matches(object) ?? true { matches.append((sort.key(for: object, id: object.id), object.id)) }
                return true
            }
            return matches.sorted { $0.key.lexicographicallyPrecedes($1.key) }.map(\.id)
        }
    }

    /// Creates students `s<index>` in one write, each with a score from `scores` (0–50) and one of
    /// 97 names.
    private func createStudents(
        _ indices: Range<Int>, in store: Store, by writer: TestWriter, scores: inout SeededGenerator
    ) throws {
        try store.write { txn in
            for index in indices {
                _ = try txn.execute(
                    .create(
                        collection: "Student", id: "s\(index)",
                        data: [
                            "score": .int(Int64.random(in: 0...50, using: &scores)),
                            "name": .string("n\(index % 97)"),
                        ]),
                    Acceptance(timestamp: Timestamp(milliseconds: 1_000 + Int64(index)), origin: writer.origin),
                    ids: &writer.ids)
            }
        }
    }

    /// Defines view `byScore` over `Student`, sorted by `sort`.
    private func defineByScore(_ sort: JSON, by writer: TestWriter) throws {
        try writer.execute(
            .defineView(
                try ViewDefinition(
                    name: "byScore", collection: "Student", whereJSON: nil, sort: SortOrder(parsing: sort),
                    unique: false)))
    }

    private func ids(_ result: QueryResult) throws -> [String] {
        guard case .array(let items) = try JSONParser.parse(Array("[".utf8) + result.items + Array("]".utf8)) else {
            return []
        }
        return items.compactMap { $0.objectValue?["id"]?.stringValue }
    }

    /// Every item of a query, page by page with cursors (or offsets), in either direction.
    private func allPages(_ store: Store, _ base: Query, limit: Int, useCursor: Bool) throws -> [String] {
        var query = base
        query.limit = limit
        var collected: [String] = []
        var offset = 0
        while true {
            let result = try store.read { try $0.run(query) }
            let page = try ids(result)
            collected += page
            offset += page.count
            guard let next = result.next else { return collected }
            query.start = useCursor ? .after(next) : .offset(offset)
        }
    }

    @Test func viewsEqualScanFilterSortAfterARandomWorkload() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            var random = SeededGenerator(seed: 11)
            try runRandomWorkload(writer, steps: 2500, random: &random)
            for view in try store.read({ try $0.views() }) {
                let definition = view.definition
                let model = try expected(
                    store, collection: definition.collection, filter: definition.filter, sort: definition.sort)
                #expect(view.count == model.count)
                let viewQuery = try Query(source: .view(definition.name))
                #expect(
                    try allPages(store, viewQuery, limit: 37, useCursor: true) == model,
                    "view \(definition.name) by cursor")
                #expect(
                    try allPages(store, viewQuery, limit: 41, useCursor: false) == model,
                    "view \(definition.name) by offset")
                var backwards = viewQuery
                backwards.descending = true
                #expect(
                    try allPages(store, backwards, limit: 29, useCursor: true) == model.reversed(),
                    "view \(definition.name) backwards")
                #expect(try allPages(store, backwards, limit: 29, useCursor: false) == model.reversed())

                // The same query by collection uses the view; wrapped in $and it cannot, and scans.
                let byCollection = try Query(
                    source: .collection(definition.collection), whereJSON: definition.whereJSON, sort: definition.sort)
                let viaView = try store.read { try $0.run(byCollection) }
                #expect(viaView.plan.source == .view(definition.name))
                let scanWhere: JSON = ["$and": [definition.whereJSON ?? ["id": ["$exists": true]]]]
                let scanned = try Query(
                    source: .collection(definition.collection), whereJSON: scanWhere, sort: definition.sort, limit: 1000
                )
                let scanResult = try store.read { try $0.run(scanned) }
                #expect(scanResult.plan.source == .scan(definition.collection))
                #expect(try allPages(store, scanned, limit: 33, useCursor: true) == model, "scan of \(definition.name)")
                #expect(scanResult.total == model.count)
                #expect(try store.read { try $0.run(byCollection, countOnly: true).total } == model.count)
            }
            for collection in ["Task", "Student", "Item"] {
                let model = try expected(store, collection: collection, filter: nil, sort: .creation)
                let query = try Query(source: .collection(collection))
                #expect(try allPages(store, query, limit: 50, useCursor: true) == model)
                var newest = query
                newest.descending = true
                #expect(try allPages(store, newest, limit: 50, useCursor: false) == model.reversed())
            }
        }
    }

    @Test func pagesAtAnyOffsetMatchTheModel() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            try defineByScore(["-score", "name"], by: writer)
            var random = SeededGenerator(seed: 3)
            try createStudents(0..<3000, in: store, by: writer, scores: &random)
            let model = try expected(
                store, collection: "Student", filter: nil, sort: try SortOrder(parsing: ["-score", "name"]))
            for offset in [0, 1, 19, 20, 1499, 2980, 2999, 3000, 5000] {
                var query = try Query(source: .view("byScore"), limit: 20, start: .offset(offset))
                let result = try store.read { try $0.run(query) }
                #expect(try ids(result) == Array(model[min(offset, 3000)..<min(offset + 20, 3000)]), "offset \(offset)")
                #expect(result.total == 3000)
                #expect(result.plan.examined <= 21, "a page reads the page, not the offset")
                query.descending = true
                let reversed = try store.read { try $0.run(query) }
                let backwards = Array(model.reversed())
                #expect(
                    try ids(reversed) == Array(backwards[min(offset, 3000)..<min(offset + 20, 3000)]),
                    "desc offset \(offset)")
            }
        }
    }

    /// A query's `readable` refuses the collection its view lists: the list and the count fail
    /// with `forbidden` in the snapshot that found the view (the server checks access before,
    /// against the view as it was then), and nothing of the collection is shown.
    @Test func aViewOfACollectionTheAskerMayNotReadIsRefusedInItsSnapshot() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            try defineByScore(["score"], by: writer)
            var random = SeededGenerator(seed: 5)
            try createStudents(0..<30, in: store, by: writer, scores: &random)
            var query = try Query(source: .view("byScore"), limit: 20)
            query.readable = { $0 != "Student" }
            for countOnly in [false, true] {
                #expect(throws: StoreError.unreadable(collection: "Student", view: "byScore")) {
                    try store.read { try $0.run(query, countOnly: countOnly) }
                }
                #expect(throws: StoreError.unreadable(collection: "Student", view: "byScore")) {
                    try store.read { try $0.runIndexed(query, countOnly: countOnly) }
                }
            }
            #expect(StoreError.unreadable(collection: "Student", view: "byScore").code == "forbidden")
            query.readable = { $0 == "Student" }
            #expect(try ids(try store.read { try $0.run(query) }).count == 20)
        }
    }

    /// A view with no ops pending (filled when it was defined) finds where a page after a cursor
    /// starts in the descent that gives the cursor's rank: every page as the model has it, of the
    /// whole view and of the part a where selects, and again once writes have left ops pending.
    @Test func pagesAfterACursorStartWhereTheCursorsDescentEnds() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            var random = SeededGenerator(seed: 17)
            func create(_ indices: Range<Int>) throws {
                try createStudents(indices, in: store, by: writer, scores: &random)
            }
            func pending() throws -> Int {
                try store.environment.read { lmdb in
                    try ViewBuffer.state(
                        StoreTransaction(
                            lmdb: lmdb, trees: store.databases.trees, cache: nil, viewOps: store.databases.viewOps)
                    ).pending
                }
            }
            func check(_ label: String) throws {
                let sort = try SortOrder(parsing: ["score", "name"])
                let whole = try Query(source: .view("byScore"))
                let model = try expected(store, collection: "Student", filter: nil, sort: sort)
                #expect(try allPages(store, whole, limit: 23, useCursor: true) == model, "\(label): the view")
                let whereJSON: JSON = ["score": 7]
                let part = try Query(source: .collection("Student"), whereJSON: whereJSON, sort: sort)
                #expect(try store.read { try $0.run(part) }.plan.source == .viewRange("byScore", fixed: ["score"]))
                let partModel = try expected(
                    store, collection: "Student", filter: Filter.parse(optional: whereJSON).filter, sort: sort)
                #expect(partModel.count > 40)
                #expect(try allPages(store, part, limit: 7, useCursor: true) == partModel, "\(label): score 7")
            }
            try create(0..<3000)
            try defineByScore(["score", "name"], by: writer)
            #expect(try pending() == 0)
            try check("no ops pending")
            try create(3000..<3200)
            #expect(try pending() > 0)
            try check("ops pending")
        }
    }

    @Test func cursorPagingSkipsAndRepeatsNothingUnderConcurrentChanges() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            try writer.execute(
                .defineView(
                    try ViewDefinition(
                        name: "byRank", collection: "Item", whereJSON: nil, sort: SortOrder(parsing: ["rank"]),
                        unique: false)))
            var random = SeededGenerator(seed: 5)
            var live: [String] = []
            for index in 0..<600 {
                live.append(
                    try writer.create(
                        "Item", ["rank": .int(Int64.random(in: 0...1000, using: &random))], id: "i\(index)"
                    ).id)
            }
            let before = Set(live)
            var deleted = Set<String>()
            var seen: [String] = []
            var query = try Query(source: .view("byRank"), limit: 25)
            var lastKey: [UInt8]?
            while true {
                let result = try store.read { try $0.run(query) }
                let page = try ids(result)
                seen += page
                // Keys must keep increasing across pages.
                for id in page {
                    let object = try #require(try store.read { try $0.object("Item", id) })
                    let key = try SortOrder(parsing: ["rank"]).key(for: object, id: id)
                    if let lastKey { #expect(lastKey.lexicographicallyPrecedes(key)) }
                    lastKey = key
                }
                guard let next = result.next else { break }
                query.start = .after(next)
                // Between pages: inserts anywhere, deletes of seen and unseen objects.
                for _ in 0..<10 {
                    live.append(
                        try writer.create("Item", ["rank": .int(Int64.random(in: 0...1000, using: &random))]).id)
                }
                for _ in 0..<6 {
                    let victim = live.remove(at: Int.random(in: 0..<live.count, using: &random))
                    try writer.execute(.delete(collection: "Item", id: victim, ifVersion: nil))
                    deleted.insert(victim)
                }
            }
            #expect(Set(seen).count == seen.count, "no item repeated")
            #expect(before.subtracting(deleted).isSubset(of: Set(seen)), "every item that existed throughout was seen")
        }
    }

    @Test func uniqueViewsRefuseDuplicateKeysAndChangeNothing() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            try writer.execute(
                .defineView(
                    try ViewDefinition(
                        name: "byStuId", collection: "Student", whereJSON: nil, sort: SortOrder(parsing: ["stuId"]),
                        unique: true)))
            _ = try writer.create("Student", ["stuId": 7, "name": "Kim"], id: "kim")
            let lee = try writer.create("Student", ["stuId": 8, "name": "Lee"], id: "lee")
            #expect {
                try writer.create("Student", ["stuId": 7.0, "name": "Other"])
            } throws: { error in
                guard case .conflict(let conflict) = error as? StoreError,
                    case .unique(let view, let key, let existing) = conflict.reason
                else { return false }
                // The key as the view holds it: kim's 7, not the incoming 7.0.
                return view == "byStuId" && key == [7] && existing == "kim"
            }
            #expect(throws: StoreError.self) {
                try writer.execute(.update(collection: "Student", id: lee.id, patch: ["stuId": 7], ifVersion: nil))
            }
            // Changing one's own key, or leaving the key as it is, is fine.
            try writer.execute(.update(collection: "Student", id: "kim", patch: ["name": "Kim K"], ifVersion: nil))
            try writer.execute(.update(collection: "Student", id: "kim", patch: ["stuId": 9], ifVersion: nil))
            _ = try writer.create("Student", ["stuId": 7, "name": "New"], id: "new")
            try store.read { snapshot throws in
                #expect(try snapshot.object("Student", "lee")?.data["stuId"] == 8)
                #expect(try snapshot.views().first?.count == 3)
                #expect(try snapshot.head().sequence == 6)
            }
            // Objects that lack the field are not bound by the rule, as NULLs in an SQL unique index.
            _ = try writer.create("Student", ["name": "No id"], id: "noid")
            _ = try writer.create("Student", ["name": "No id either"], id: "noid2")
            try store.read { snapshot throws in #expect(try snapshot.views().first?.count == 5) }
        }
    }

    @Test func aUniqueViewOverDuplicatesIsRefusedAndListsThem() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            for (id, name) in [("a", "Kim"), ("b", "Lee"), ("c", "Kim"), ("d", "Kim"), ("e", "Lee"), ("f", "Max")] {
                _ = try writer.create("Student", ["name": .string(name)], id: id)
            }
            #expect {
                try writer.execute(
                    .defineView(
                        try ViewDefinition(
                            name: "byName", collection: "Student", whereJSON: nil, sort: SortOrder(parsing: ["name"]),
                            unique: true)))
            } throws: { error in
                guard case .conflict(let conflict) = error as? StoreError,
                    case .duplicates(let view, let groups) = conflict.reason
                else { return false }
                return view == "byName" && Set(groups.map(Set.init)) == [["a", "c", "d"], ["b", "e"]]
            }
            try store.read { snapshot throws in
                #expect(try snapshot.views().isEmpty)
                #expect(try snapshot.head().sequence == 6)
            }
        }
    }

    /// 1, 1.0 and 1e0 are one key: one group of three, named by the first object's spelling.
    @Test func duplicatesSpelledDifferentlyAreOneGroup() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            _ = try writer.create("Item", ["code": 1], id: "c0")
            _ = try writer.create("Item", ["code": 1.0], id: "c1")
            _ = try writer.create("Item", ["code": .double(1)], id: "c2")
            _ = try writer.create("Item", ["code": 2], id: "c3")
            #expect {
                try writer.execute(
                    .defineView(
                        try ViewDefinition(
                            name: "byCode", collection: "Item", whereJSON: nil, sort: SortOrder(parsing: ["code"]),
                            unique: true)))
            } throws: { error in
                guard case .conflict(let conflict) = error as? StoreError,
                    case .duplicates(_, let groups) = conflict.reason
                else { return false }
                return groups == [["c0", "c1", "c2"]] && conflict.message.contains("[1]: c0, c1, c2")
            }
        }
    }

    @Test func viewsSurviveReopeningAndAreRecreatedByReplay() throws {
        try withTemporaryDirectory { root in
            do {
                let store = try Store(directory: root + "/a")
                let writer = TestWriter(store)
                try writer.execute(
                    .defineView(
                        try ViewDefinition(
                            name: "open", collection: "Task", whereJSON: ["done": false],
                            sort: SortOrder(parsing: ["title"]), unique: false)))
                for index in 0..<50 {
                    _ = try writer.create("Task", ["title": .string("t\(index)"), "done": .bool(index % 3 == 0)])
                }
            }
            let reopened = try Store(directory: root + "/a")
            #expect(try reopened.read { try $0.views().map(\.count) } == [33])
            let replayed = try replay(reopened, into: root + "/b")
            #expect(try replayed.read { try $0.views().map(\.definition.name) } == ["open"])
            #expect(try reopened.differences(from: replayed) == [])
        }
    }

    @Test func queriesSpelledDifferentlyShareViewsAndCursors() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            try writer.execute(
                .defineView(
                    try ViewDefinition(
                        name: "open", collection: "Task", whereJSON: ["done": false, "n": ["$gt": 1]],
                        sort: SortOrder(parsing: ["n"]), unique: false)))
            for index in 0..<10 { _ = try writer.create("Task", ["done": false, "n": .int(Int64(index))]) }
            let reordered = try Query(
                source: .collection("Task"), whereJSON: ["n": ["$gt": 1], "done": false],
                sort: SortOrder(parsing: ["n"]), limit: 3)
            let page = try store.read { try $0.run(reordered) }
            #expect(page.plan.source == .view("open"), "where keys in another order still match the view")
            var next = try Query(
                source: .collection("Task"), whereJSON: ["done": false, "n": ["$gt": 1]],
                sort: SortOrder(parsing: ["n"]), limit: 3)
            next.start = .after(try #require(page.next))
            #expect(
                try store.read { try $0.run(next) }.itemCount == 3,
                "a cursor works with the same query spelled differently")

            let everything = try Query(
                source: .collection("Task"), whereJSON: .object(JSONObject()), sort: SortOrder(parsing: []))
            #expect(
                try store.read { try $0.run(everything) }.plan.source == .creationOrder("Task"),
                "an empty where uses the index")
            var cursorQuery = everything
            cursorQuery.limit = 4
            let first = try store.read { try $0.run(cursorQuery) }
            var plain = try Query(source: .collection("Task"), limit: 4)
            plain.start = .after(try #require(first.next))
            #expect(try store.read { try $0.run(plain) }.itemCount == 4)
        }
    }

    @Test func sortKeysTooLongForAViewAreRefused() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            try writer.execute(
                .defineView(
                    try ViewDefinition(
                        name: "byTitle", collection: "Task", whereJSON: nil, sort: SortOrder(parsing: ["title"]),
                        unique: false)))
            #expect(throws: StoreError.self) {
                try writer.create("Task", ["title": .string(String(repeating: "x", count: 600))])
            }
            _ = try writer.create("Task", ["title": .string(String(repeating: "x", count: 300))])
        }
    }

    /// A where filters links and backlinks without changing their order: the field's array order
    /// (a missing target matching nothing), the referrers' id order; not creation order.
    @Test func aWhereKeepsTheOrderOfLinksAndBacklinks() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            // Created in an order that is neither the ids' nor the field's.
            for (id, rank) in [("i3", 2), ("i1", 1), ("i2", -1), ("i0", 5)] {
                _ = try writer.create("Item", ["rank": .int(Int64(rank)), "category": ["$ref": "Category/c"]], id: id)
            }
            _ = try writer.create(
                "Category",
                [
                    "items": [
                        ["$ref": "Item/i2"], ["$ref": "Item/i3"], ["$ref": "Item/gone"], ["$ref": "Item/i1"],
                        ["$ref": "Item/i3"],
                    ]
                ], id: "c")
            let matching: JSON = ["rank": ["$gte": 0]]
            let links = Query.Source.links(collection: "Category", id: "c", field: ["items"])
            let backlinks = Query.Source.backlinks(
                collection: "Category", id: "c", sourceCollection: "Item", path: "category")
            for (source, expected) in [(links, ["i3", "i1", "i3"]), (backlinks, ["i0", "i1", "i3"])] {
                for descending in [false, true] {
                    let query = try Query(source: source, whereJSON: matching, descending: descending)
                    let order = descending ? expected.reversed() : expected
                    #expect(try allPages(store, query, limit: 1, useCursor: true) == order, "\(source)")
                    #expect(try allPages(store, query, limit: 2, useCursor: false) == order, "\(source)")
                    #expect(try store.read { try $0.run(query, countOnly: true).total } == expected.count)
                }
            }
        }
    }
}
