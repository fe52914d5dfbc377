import FolioJSON
import FolioModel
import Testing

@testable import FolioStore

/// A page of a collection in creation order reads its objects through one cursor (ids grow with
/// creation, so they are neighbours in the objects' tree): every page must be what the model has,
/// whether the ids are generated (neighbours) or the clients' own (scattered), with the history of
/// updated objects and the gaps of deleted ones between them, in either direction.
@Suite struct CreationOrderPageTests {
    private func ids(_ result: QueryResult) throws -> [String] {
        guard case .array(let items) = try JSONParser.parse(Array("[".utf8) + result.items + Array("]".utf8)) else { return [] }
        return items.compactMap { $0.objectValue?["id"]?.stringValue }
    }

    @Test func pagesInCreationOrderMatchTheModel() throws {
        try withTemporaryStore { store in
            defer { store.close() }
            let writer = TestWriter(store)
            var random = SeededGenerator(seed: 11)
            var live: [String] = []
            try store.write { txn in
                for index in 0..<2500 {
                    // One object in five has a client's id, which sorts anywhere among the generated ones.
                    let id: String? = index % 5 == 0 ? "c\(UInt32.random(in: 0...UInt32.max, using: &random))" : nil
                    let created = try txn.execute(
                        .create(collection: "Item", id: id, data: ["n": .int(Int64(index))]),
                        Acceptance(timestamp: Timestamp(milliseconds: 1_000 + Int64(index / 3)), origin: writer.origin), ids: &writer.ids)
                    live.append(created.appended[0].object!.id)
                }
            }
            for step in 0..<300 {
                let id = live[Int.random(in: 0..<live.count, using: &random)]
                if step % 3 == 0 {
                    try writer.execute(.delete(collection: "Item", id: id, ifVersion: nil))
                    live.removeAll { $0 == id }
                } else {
                    try writer.execute(.update(collection: "Item", id: id, patch: ["m": .int(Int64(step))], ops: nil, ifVersion: nil))
                }
            }
            let model = try store.read { snapshot in
                var objects: [(key: [UInt8], id: String)] = []
                try snapshot.objects.forEach(in: "Item", snapshot.txn) { object in
                    objects.append((SortOrder.creation.key(for: object, id: object.id), object.id))
                    return true
                }
                return objects.sorted { $0.key.lexicographicallyPrecedes($1.key) }.map(\.id)
            }
            #expect(model.count == live.count)
            let reader = try store.makeReader()
            for offset in [0, 1, 19, 777, 1000, model.count - 20, model.count - 1, model.count] {
                var query = try Query(source: .collection("Item"), limit: 20, start: .offset(offset))
                let page = try reader.read { try $0.run(query) }
                #expect(page.plan.source == .creationOrder("Item"))
                #expect(try ids(page) == Array(model[min(offset, model.count)..<min(offset + 20, model.count)]), "offset \(offset)")
                query.descending = true
                let backwards = Array(model.reversed())
                #expect(try ids(try reader.read { try $0.run(query) }) == Array(backwards[min(offset, model.count)..<min(offset + 20, model.count)]), "desc offset \(offset)")
            }
        }
    }
}
