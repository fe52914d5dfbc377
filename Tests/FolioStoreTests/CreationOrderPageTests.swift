import FolioJSON
import FolioModel
import Testing

@testable import FolioStore

/// A page in creation or id order (a collection's default list, a view sorted by `createdAt` or
/// `id`, a range of a view whose next field is one of them) reads its objects through one cursor
/// (ids grow with creation, so they are neighbours in the objects' tree): every page must be what
/// the model has, whether the ids are generated (neighbours) or the clients' own (scattered), with
/// the history of updated objects and the gaps of deleted ones between them, in either direction.
@Suite struct CreationOrderPageTests {
    private func view(_ name: String, _ sort: [String]) throws -> Command {
        .defineView(
            try ViewDefinition(
                name: name, collection: "Item", whereJSON: nil,
                sort: SortOrder(parsing: .array(sort.map { JSON.string($0) })), unique: false))
    }

    private func ids(_ result: QueryResult) throws -> [String] {
        guard case .array(let items) = try JSONParser.parse(Array("[".utf8) + result.items + Array("]".utf8)) else {
            return []
        }
        return items.compactMap { $0.objectValue?["id"]?.stringValue }
    }

    @Test func pagesInCreationOrderMatchTheModel() throws {
        try withTemporaryStore { store in
            defer { store.close() }
            let writer = TestWriter(store)
            var random = SeededGenerator(seed: 11)
            var live: [String] = []
            try writer.execute(try view("newest", ["-createdAt"]))
            try writer.execute(try view("byID", ["id"]))
            try writer.execute(try view("byGroup", ["g", "createdAt"]))
            try store.write { txn in
                for index in 0..<2500 {
                    // One object in five has a client's id, which sorts anywhere among the generated ones.
                    let id: String? = index % 5 == 0 ? "c\(UInt32.random(in: 0...UInt32.max, using: &random))" : nil
                    let created = try txn.execute(
                        .create(
                            collection: "Item", id: id, data: ["n": .int(Int64(index)), "g": .int(Int64(index % 3))]),
                        Acceptance(timestamp: Timestamp(milliseconds: 1_000 + Int64(index / 3)), origin: writer.origin),
                        ids: &writer.ids)
                    live.append(created.appended[0].object!.id)
                }
            }
            for step in 0..<300 {
                let id = live[Int.random(in: 0..<live.count, using: &random)]
                if step % 3 == 0 {
                    try writer.execute(.delete(collection: "Item", id: id, ifVersion: nil))
                    live.removeAll { $0 == id }
                } else {
                    try writer.execute(
                        .update(collection: "Item", id: id, patch: ["m": .int(Int64(step))], ops: nil, ifVersion: nil))
                }
            }
            /// The ids of the objects `matching`, in `sort`'s order.
            func model(_ sort: SortOrder, matching: (StoredObject) -> Bool = { _ in true }) throws -> [String] {
                try store.read { snapshot in
                    var objects: [(key: [UInt8], id: String)] = []
                    try snapshot.objects.forEach(in: "Item", snapshot.txn) { object in
                        if matching(object) { objects.append((sort.key(for: object, id: object.id), object.id)) }
                        return true
                    }
                    return objects.sorted { $0.key.lexicographicallyPrecedes($1.key) }.map(\.id)
                }
            }
            let reader = try store.makeReader()
            /// Every page of 20 at these offsets, both ways, as `expected` has them.
            func check(_ base: Query, _ expected: [String], idOrder: Bool) throws {
                #expect(
                    try store.read { snapshot in
                        if case .tree(_, _, _, _, let planned) = try snapshot.plan(for: base) { return planned }
                        return nil
                    } == idOrder, "\(base.source)")
                for offset in [
                    0, 1, 19, 777, expected.count / 2, expected.count - 20, expected.count - 1, expected.count,
                ] where offset >= 0 {
                    var query = base
                    query.limit = 20
                    query.start = .offset(offset)
                    let page = try reader.read { try $0.run(query) }
                    #expect(
                        try ids(page)
                            == Array(expected[min(offset, expected.count)..<min(offset + 20, expected.count)]),
                        "\(base.source) offset \(offset)")
                    query.descending = true
                    let backwards = Array(expected.reversed())
                    #expect(
                        try ids(try reader.read { try $0.run(query) })
                            == Array(backwards[min(offset, expected.count)..<min(offset + 20, expected.count)]),
                        "\(base.source) desc offset \(offset)")
                }
            }
            let creation = try model(.creation)
            #expect(creation.count == live.count)
            try check(try Query(source: .collection("Item")), creation, idOrder: true)
            try check(try Query(source: .view("newest")), try model(SortOrder(parsing: ["-createdAt"])), idOrder: true)
            try check(try Query(source: .view("byID")), try model(SortOrder(parsing: ["id"])), idOrder: true)
            let groupOne = try model(SortOrder(parsing: ["createdAt"])) { $0.data["g"] == .int(1) }
            #expect(groupOne.count > creation.count / 4)
            try check(try Query(source: .view("byGroup"), whereJSON: ["g": 1]), groupOne, idOrder: true)
            try check(
                try Query(source: .collection("Item"), whereJSON: ["g": 1], sort: SortOrder(parsing: ["createdAt"])),
                groupOne, idOrder: true)
            try check(
                try Query(source: .view("byGroup")), try model(SortOrder(parsing: ["g", "createdAt"])), idOrder: false)
        }
    }

    /// A page stops after the item that takes it past `Snapshot.pageByteBudget`, with a cursor at
    /// that item: walking the pages by their cursors gives every object once, in order, both ways,
    /// from a view's tree and from a sorted scan alike.
    @Test func pagesCutByTheirBytesGoOnWhereTheyStopped() throws {
        try withTemporaryStore { store in
            defer { store.close() }
            let writer = TestWriter(store)
            try writer.execute(try view("byRank", ["rank"]))
            // 30 objects of about 700 KB: a page of 20 would be 14 MB.
            let filler = String(repeating: "x", count: 700_000)
            var order: [(rank: Int, id: String)] = []
            for index in 0..<30 {
                let rank = (index * 7) % 30
                let created = try writer.execute(
                    .create(
                        collection: "Item", id: nil,
                        data: ["rank": .int(Int64(rank)), "unviewed": .int(Int64(rank)), "blob": .string(filler)]))
                order.append((rank, created.object!.id))
            }
            let expected = order.sorted { $0.rank < $1.rank }.map(\.id)
            let reader = try store.makeReader()
            let scanned = try Query(source: .collection("Item"), sort: SortOrder(parsing: ["unviewed"]))
            #expect(
                try store.read { snapshot in
                    if case .tree = try snapshot.plan(for: scanned) { return false }
                    return true
                })
            for base in [try Query(source: .view("byRank")), scanned] {
                for descending in [false, true] {
                    var query = base
                    query.limit = 20
                    query.descending = descending
                    var seen: [String] = []
                    var pages = 0
                    while true {
                        let page = try reader.read { try $0.run(query) }
                        let items = try ids(page)
                        pages += 1
                        #expect(!items.isEmpty && items.count < 20, "\(base.source): a page of \(items.count)")
                        #expect(page.items.count >= Snapshot.pageByteBudget || page.next == nil)
                        seen += items
                        guard let next = page.next else { break }
                        query.start = .after(next)
                        if pages > 10 { break }
                    }
                    #expect(
                        seen == (descending ? expected.reversed() : expected), "\(base.source) descending \(descending)"
                    )
                    #expect(pages == 3, "\(base.source): \(pages) pages")
                }
            }
        }
    }
}
