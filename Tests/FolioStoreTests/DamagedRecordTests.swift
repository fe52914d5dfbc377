import FolioJSON
import FolioModel
import LMDB
import Testing

@testable import FolioStore

/// Records of a damaged store, cut short: each read that meets one answers `corrupted`, naming the
/// record, instead of reading past its end (`UnsafeRawBufferPointer.leadingLittleEndian`).
@Suite struct DamagedRecordTests {
    /// A store with a collection, a view over it, an object with some history, and one record of
    /// it then cut to two bytes.
    private func withDamagedStore(
        _ database: (StoreDatabases) -> Database, key: [UInt8], _ body: (Store, TestWriter) throws -> Void
    ) throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            try writer.execute(
                .defineView(
                    try ViewDefinition(
                        name: "byRank", collection: "Task", whereJSON: nil, sort: SortOrder(parsing: ["rank"]),
                        unique: false)))
            let task = try writer.create("Task", ["rank": 1, "title": "a"], id: "t1")
            try writer.execute(.update(collection: "Task", id: task.id, patch: ["rank": 2], ops: nil, ifVersion: nil))
            let target = database(store.databases)
            try store.environment.write { txn in
                let intact = try #require(try txn.get(target, key))
                #expect(intact.count >= 4)
                try txn.put(target, key, [0x01, 0x02])
            }
            try body(store, writer)
        }
    }

    /// `operation` fails with `corrupted` naming the record and saying what is wrong with it (in a
    /// write, as the underlying error of the transaction it spoiled): by default, cut to 2 bytes.
    private func expectCorrupted(
        _ naming: String, saying wrong: String = "2 bytes", in what: String, _ operation: () throws -> Void
    ) {
        do {
            try operation()
            Issue.record("\(what): no error; expected one naming \(naming)")
        } catch {
            let underlying = (error as? StoreWriter.SpoiledTransaction)?.underlying ?? error
            guard case StoreError.corrupted(let message) = underlying else {
                Issue.record("\(what): \(error); expected corrupted, naming \(naming)")
                return
            }
            #expect(message.contains(naming) && message.contains(wrong), "\(what): \(message)")
        }
    }

    @Test func aCollectionsCatalogRecordCutShort() throws {
        try withDamagedStore({ $0.catalog }, key: [UInt8(ascii: "c")] + Array("Task".utf8)) { store, writer in
            expectCorrupted("collection Task", in: "a list") {
                _ = try store.read { try $0.run(try Query(source: .collection("Task"))) }
            }
            expectCorrupted("collection Task", in: "a create") { try writer.create("Task", ["rank": 3], id: "t2") }
            expectCorrupted("collection Task", in: "stats") { _ = try store.read { try $0.statistics() } }
        }
    }

    @Test func aViewsCatalogRecordCutShort() throws {
        try withDamagedStore({ $0.catalog }, key: [UInt8(ascii: "v")] + Array("byRank".utf8)) { store, writer in
            expectCorrupted("a view", in: "views") { _ = try store.read { try $0.views() } }
            expectCorrupted("a view", in: "a list") {
                _ = try store.read { try $0.run(try Query(source: .view("byRank"))) }
            }
        }
    }

    @Test func theNextTreeIDCutShort() throws {
        try withDamagedStore({ $0.meta }, key: Array("nextTree".utf8)) { _, writer in
            expectCorrupted("the next tree id", in: "a create in a new collection") {
                try writer.create("Note", ["text": "a new collection needs a tree"])
            }
        }
    }

    /// The state of the views' pending ops, which every read of a view and every write into its
    /// collection reads: cut short; with a merge round claiming more trees than it holds; with a
    /// round of no trees cut inside its turns.
    @Test(arguments: ["cut short", "more trees", "cut in its turns"])
    func theViewOpsStateDamaged(damage: String) throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            try writer.execute(
                .defineView(
                    try ViewDefinition(
                        name: "byRank", collection: "Task", whereJSON: nil, sort: SortOrder(parsing: ["rank"]),
                        unique: false)))
            try writer.create("Task", ["rank": 1], id: "t1")
            let main = store.databases.viewOps.main
            try store.environment.write { txn in
                let intact = try #require(try txn.get(main, ViewBuffer.stateKey)).map { $0 }
                #expect(intact.count >= 24)
                var damaged: [UInt8] = []
                if damage == "cut short" {
                    damaged = Array(intact.prefix(10))
                } else {
                    damaged.appendLittleEndian(BufferState.roundMark)
                    for value: UInt64 in [0, 0, 0, 0] { damaged.appendLittleEndian(value) }
                    damaged.appendLittleEndian(UInt32(0))
                    damaged.appendLittleEndian(UInt32(damage == "more trees" ? 0x7FFF_FFFF : 0))
                    // No trees, then 13 of the round's 16 bytes of turns, chunk and partial.
                    if damage == "cut in its turns" { damaged += [UInt8](repeating: 0, count: 13) }
                }
                try txn.put(main, ViewBuffer.stateKey, damaged)
            }
            let wrong = [
                "cut short": "is cut short", "more trees": "merge round of 2147483647 trees",
                "cut in its turns": "merge round of 0 trees",
            ][damage]!
            expectCorrupted("view ops' state", saying: wrong, in: "a page") {
                _ = try store.read { try $0.run(try Query(source: .view("byRank"))) }
            }
            expectCorrupted("view ops' state", saying: wrong, in: "a create") {
                try writer.create("Task", ["rank": 2], id: "t2")
            }
        }
    }

    @Test func theFormatRecordCutShort() throws {
        try withTemporaryDirectory { path in
            do {
                let store = try Store(directory: path)
                try store.environment.write { txn in
                    try txn.put(store.databases.meta, Array("format".utf8), [0x01, 0x02])
                }
            }
            expectCorrupted("the store's format record", in: "an open") { _ = try Store(directory: path) }
        }
    }

    /// A create of an id whose object was deleted reads the version its history ended at.
    @Test func aHistoryEntryCutShort() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            let task = try writer.create("Task", ["rank": 1], id: "t1")
            try writer.execute(.update(collection: "Task", id: task.id, patch: ["rank": 2], ops: nil, ifVersion: nil))
            try writer.execute(.delete(collection: "Task", id: task.id, ifVersion: nil))
            // The object's last history entry: the greatest key under its prefix.
            let prefix = Keys.historyPrefix("Task", "t1")
            let key = try store.environment.read { txn in
                try txn.withCursor(store.databases.objects) { cursor in
                    let (key, _) = try #require(try cursor.seek(atMost: prefix + [UInt8](repeating: 0xFF, count: 8)))
                    return Array(key)
                }
            }
            #expect(key.starts(with: prefix) && key.count == prefix.count + 8)
            try store.environment.write { txn in try txn.put(store.databases.objects, key, [0x01, 0x02]) }
            expectCorrupted("history entry of Task/t1", in: "a create of a deleted id") {
                try writer.create("Task", ["rank": 3], id: "t1")
            }
        }
    }
}
