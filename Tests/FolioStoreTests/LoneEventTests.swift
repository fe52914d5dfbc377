import FolioJSON
import FolioModel
import Foundation
import Testing

@testable import FolioStore

/// `StoreWriter.onLoneEventLogged`, by which the writer hands a lone write's journal record over
/// before the event is applied: it must be shown exactly the bytes and chain hash the log keeps,
/// and only for a write that can make no other event and cannot fail once its event is logged (a
/// request key included: such an event is made with its request's record).
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
                return try storeWriter.execute(
                    WriteRequest(command: command, requestKey: requestKey), acceptance, ids: &writer.ids)
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
                found = (
                    ChainHash(bytes: Array(record.prefix(ChainHash.size))), Array(record.dropFirst(ChainHash.size))
                )
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
                #expect(
                    appended.count == 1 && shown.count == 1,
                    "\(command.opName): shown \(shown.count) for \(appended.count) events")
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

    /// A lone write with a request key makes its event with the request's record, where the nested
    /// path amends the event after it is logged: the log must come out byte for byte the same.
    @Test func aKeyedLoneWriteLogsWhatTheAmendedEventWas() throws {
        try withTemporaryDirectory { root in
            let stores = [try Store(directory: root + "/lone"), try Store(directory: root + "/nested")]
            defer { stores.forEach { $0.close() } }
            var shownByKey: [String: Int] = [:]
            for (index, store) in stores.enumerated() {
                let writer = TestWriter(store)
                let isolating = index == 1
                let writes: [(Command, String?)] = [
                    (.create(collection: "Task", id: "t1", data: ["title": "a"]), "k1"),
                    (.create(collection: "Task", id: nil, data: ["title": "generated"]), "k2"),
                    (.update(collection: "Task", id: "t1", patch: ["title": "b"], ifVersion: 1), "k3"),
                    (.create(collection: "Task", id: "t2", data: ["title": "no key"]), nil),
                    (.delete(collection: "Task", id: "t2", ifVersion: nil), "k4"),
                    // The first request again: answered from its events, nothing written.
                    (.create(collection: "Task", id: "t1", data: ["title": "a"]), "k1"),
                ]
                for (command, key) in writes {
                    let (shown, outcome) = try write(writer, command, requestKey: key, isolating: isolating)
                    let outcomeFound = try #require(outcome)
                    if let key, !isolating { shownByKey[key, default: 0] += shown.count }
                    if let key, !outcomeFound.replayed {
                        #expect(outcomeFound.appended.last?.event.request?.key == key)
                        if let shown = shown.first {
                            #expect(shown.canonicalEvent == outcomeFound.appended[0].canonicalEvent)
                        }
                    }
                }
            }
            #expect(shownByKey == ["k1": 1, "k2": 1, "k3": 1, "k4": 1], "\(shownByKey)")
            let logs = try stores.map { store in
                try store.read { snapshot in
                    var records: [[UInt8]] = []
                    try snapshot.forEachEvent(after: 0, limit: 100) { _, record in
                        records.append(Array(record))
                        return true
                    }
                    return records
                }
            }
            #expect(logs[0].count == 5 && logs[0] == logs[1])
            #expect(try stores[0].read { try $0.digest() } == stores[1].read { try $0.digest() })
            // The keys are known to the request index: a retry on either is replayed.
            for store in stores {
                let (_, again) = try write(
                    TestWriter(store), .update(collection: "Task", id: "t1", patch: ["title": "b"], ifVersion: 1),
                    requestKey: "k3")
                #expect(again?.replayed == true)
            }
        }
    }

    @Test func writesThatCanMakeMoreEventsOrFailLaterAreNotShown() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            try writer.execute(
                .defineSchema(
                    try Schema(parsing: [
                        "collection": "Task", "fields": ["project": ["type": "ref", "onTargetDelete": "cascade"]],
                    ])))
            _ = try writer.create("Project", [:], id: "p")
            _ = try writer.create("Task", ["project": ["$ref": "Project/p"]], id: "t")
            _ = try writer.create("Note", ["n": 1], id: "n")

            // A delete that delete rules make more events of (the cascade to t).
            let cascade = try write(writer, .delete(collection: "Project", id: "p", ifVersion: nil))
            #expect(cascade.outcome?.appended.count == 2 && cascade.shown.isEmpty)
            // A delete with a request key that rules make more events of runs nested, its key
            // recorded in its last event after the events.
            _ = try writer.create("Project", [:], id: "q")
            _ = try writer.create("Task", ["project": ["$ref": "Project/q"]], id: "u")
            let keyed = try write(writer, .delete(collection: "Project", id: "q", ifVersion: nil), requestKey: "key-1")
            #expect(keyed.outcome?.appended.count == 2 && keyed.shown.isEmpty)
            // A batch, and every command once the writer isolates each.
            let batch = try write(
                writer,
                .batch(
                    [
                        BatchOperation(
                            command: .create(collection: "Note", id: "b", data: [:]), idResult: nil,
                            hasResultValues: false)
                    ], atomic: true))
            #expect(batch.outcome?.appended.count == 1 && batch.shown.isEmpty)
            let isolated = try write(
                writer, .update(collection: "Note", id: "n", patch: ["n": 2], ifVersion: nil), isolating: true)
            #expect(isolated.outcome?.appended.count == 1 && isolated.shown.isEmpty)
            // Views and schemas are not object writes.
            let view = try write(
                writer, .defineView(try ViewDefinition(parsing: ["name": "byN", "collection": "Note", "sort": ["n"]])))
            #expect(view.outcome?.appended.count == 1 && view.shown.isEmpty)
            // A write refused by its checks logs nothing and shows nothing.
            let refused = try write(writer, .create(collection: "Note", id: "n", data: [:]))
            #expect(refused.outcome == nil && refused.shown.isEmpty)
            let stale = try write(writer, .update(collection: "Note", id: "n", patch: ["n": 3], ifVersion: 1))
            #expect(stale.outcome == nil && stale.shown.isEmpty)
        }
    }
}
