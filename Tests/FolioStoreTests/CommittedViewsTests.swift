import FolioJSON
import FolioModel
import Testing

@testable import FolioStore

/// Writes take a collection's views from what an earlier write read of the committed state
/// (`CommittedViews`), so each change to the views must reach the writes after it.
@Suite struct CommittedViewsTests {
    /// A view defined, one defined by a write that fails, and one dropped: every create after each
    /// goes into exactly the views committed before it, and the store verifies and replays alike.
    @Test func writesSeeEveryChangeToTheViews() throws {
        try withTemporaryDirectory { path in
            let store = try Store(directory: path)
            defer { store.close() }
            let writer = TestWriter(store)
            func definition(_ name: String, _ field: String) throws -> ViewDefinition {
                try ViewDefinition(
                    name: name, collection: "Task", whereJSON: nil, sort: SortOrder(parsing: [.string(field)]),
                    unique: false)
            }
            /// The view's entries, nil when it does not exist.
            func entries(_ name: String) throws -> Int? {
                try store.read { snapshot in
                    let txn = snapshot.storeTxn
                    return try store.applier.catalog.view(name, txn).map { try $0.tree.count(txn) }
                }
            }
            _ = try writer.create("Task", ["n": 1, "m": 1])  // a write that reads Task's views: none
            try writer.execute(.defineView(try definition("byN", "n")))
            _ = try writer.create("Task", ["n": 2, "m": 2])
            #expect(try entries("byN") == 2, "the create after the definition goes into the view")

            struct Refused: Error {}
            #expect(throws: Refused.self) {
                try writer.write(.defineView(try definition("byM", "m"))) { _ in throw Refused() }
            }
            _ = try writer.create("Task", ["n": 3, "m": 3])
            #expect(try entries("byM") == nil)
            #expect(try entries("byN") == 3, "the failed definition took nothing away")

            try writer.execute(.dropView(name: "byN"))
            _ = try writer.create("Task", ["n": 4, "m": 4])
            #expect(try entries("byN") == nil)
            try writer.execute(.defineView(try definition("byN", "m")))
            _ = try writer.create("Task", ["n": 5, "m": 5])
            #expect(try entries("byN") == 5, "a view of the same name, defined again, over every object")
            try expectVerifyRebuildAndReplayKeepTheDigest(store, path)
        }
    }
}
