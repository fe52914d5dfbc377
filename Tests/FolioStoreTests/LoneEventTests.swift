import FolioJSON
import FolioModel
import Foundation
import Testing

@testable import FolioStore

/// `StoreWriter.onLoneEventLogged`, by which the writer hands a lone write's journal record over
/// before the event is applied: it must be shown exactly the bytes and chain hash the log keeps,
/// and only for a write that can make no other event and cannot fail once its event is logged.
@Suite struct LoneEventTests {
    /// Runs `command` in a transaction of its own with the hook set; returns what it was shown and
    /// what the write made (nil when it failed).
    private func write(
        _ writer: TestWriter, _ command: Command, requestKey: String? = nil, isolating: Bool = false
    ) throws -> (shown: [StoreWriter.Applied], outcome: WriteOutcome?) {
        var shown: [StoreWriter.Applied] = []
        writer.clock += 7
        let acceptance = Acceptance(timestamp: Timestamp(milliseconds: writer.clock), origin: writer.origin)
        do {
            let outcome = try writer.store.write { storeWriter in
                storeWriter.isolatesEveryCommand = isolating
                storeWriter.onLoneEventLogged = { shown.append($0) }
                return try storeWriter.execute(WriteRequest(command: command, requestKey: requestKey), acceptance, ids: &writer.ids)
            }
            return (shown, outcome)
        } catch is StoreError {
            return (shown, nil)
        }
    }

    /// The log's record of `sequence`: chain hash and canonical event.
    private func logged(_ store: Store, _ sequence: UInt64) throws -> (hash: ChainHash, canonical: [UInt8]) {
        try store.read { snapshot in
            var found: (ChainHash, [UInt8])?
            try snapshot.forEachEvent(after: sequence - 1, limit: 1) { _, record in
                found = (ChainHash(bytes: Array(record.prefix(ChainHash.size))), Array(record.dropFirst(ChainHash.size)))
                return false
            }
            return try #require(found)
        }
    }

    @Test func aLoneObjectWriteShowsItsEventAsTheLogHoldsIt() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            _ = try writer.create("User", ["name": "ann"], id: "ann")
            for command in [
                Command.create(collection: "Task", id: "t1", data: ["title": "a", "owner": ["$ref": "User/ann"]]),
                Command.create(collection: "Task", id: nil, data: ["title": "generated id"]),
                .update(collection: "Task", id: "t1", patch: ["title": "b"], ifVersion: 1),
                .delete(collection: "Task", id: "t1", ifVersion: nil),
            ] {
                let (shown, outcome) = try write(writer, command)
                let appended = try #require(outcome?.appended)
                #expect(appended.count == 1 && shown.count == 1, "\(command.opName): shown \(shown.count) for \(appended.count) events")
                guard let event = shown.first, let applied = appended.first else { continue }
                #expect(event.event.sequence == applied.event.sequence)
                #expect(event.chainHash == applied.chainHash && event.canonicalEvent == applied.canonicalEvent)
                let record = try logged(store, applied.event.sequence)
                #expect(record.hash == event.chainHash && record.canonical == event.canonicalEvent, "\(command.opName)")
                // Only the event: the object is not worked out yet when it is shown.
                #expect(event.object == nil && event.record == nil)
            }
        }
    }

    @Test func writesThatCanMakeMoreEventsOrFailLaterAreNotShown() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            try writer.execute(.defineSchema(try Schema(parsing: ["collection": "Task", "fields": ["project": ["type": "ref", "onTargetDelete": "cascade"]]])))
            _ = try writer.create("Project", [:], id: "p")
            _ = try writer.create("Task", ["project": ["$ref": "Project/p"]], id: "t")
            _ = try writer.create("Note", ["n": 1], id: "n")

            // A delete that delete rules make more events of (the cascade to t).
            let cascade = try write(writer, .delete(collection: "Project", id: "p", ifVersion: nil))
            #expect(cascade.outcome?.appended.count == 2 && cascade.shown.isEmpty)
            // A write with a request key runs nested: its key is recorded after the event.
            let keyed = try write(writer, .create(collection: "Note", id: "k", data: [:]), requestKey: "key-1")
            #expect(keyed.outcome?.appended.count == 1 && keyed.shown.isEmpty)
            // A batch, and every command once the writer isolates each.
            let batch = try write(writer, .batch([BatchOperation(command: .create(collection: "Note", id: "b", data: [:]), idResult: nil, hasResultValues: false)], atomic: true))
            #expect(batch.outcome?.appended.count == 1 && batch.shown.isEmpty)
            let isolated = try write(writer, .update(collection: "Note", id: "n", patch: ["n": 2], ifVersion: nil), isolating: true)
            #expect(isolated.outcome?.appended.count == 1 && isolated.shown.isEmpty)
            // Views and schemas are not object writes.
            let view = try write(writer, .defineView(try ViewDefinition(parsing: ["name": "byN", "collection": "Note", "sort": ["n"]])))
            #expect(view.outcome?.appended.count == 1 && view.shown.isEmpty)
            // A write refused by its checks logs nothing and shows nothing.
            let refused = try write(writer, .create(collection: "Note", id: "n", data: [:]))
            #expect(refused.outcome == nil && refused.shown.isEmpty)
            let stale = try write(writer, .update(collection: "Note", id: "n", patch: ["n": 3], ifVersion: 1))
            #expect(stale.outcome == nil && stale.shown.isEmpty)
        }
    }
}
