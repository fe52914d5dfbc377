import FolioJSON
import FolioModel
import Testing

@testable import FolioStore

@Suite struct StoreTests {
    @Test func createGetUpdateDeleteFollowTheEventLog() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            let created = try writer.create(
                "Task",
                ["title": "Buy milk", "done": false, "tags": ["a"], "address": ["city": "Oslo", "zip": "0150"]])
            #expect(created.version == 1)
            #expect(created.createdAt == created.updatedAt)

            let updated = try writer.execute(
                .update(
                    collection: "Task", id: created.id,
                    patch: ["done": true, "tags": .null, "address": ["zip": .null, "street": "Main"]], ifVersion: 1)
            ).object!
            #expect(updated.version == 2)
            #expect(
                updated.data == ["title": "Buy milk", "done": true, "address": ["city": "Oslo", "street": "Main"]]
                    as JSONObject)
            #expect(updated.createdAt == created.createdAt)
            #expect(updated.updatedAt > created.updatedAt)

            try store.read { snapshot throws in
                #expect(try snapshot.object("Task", created.id) == updated)
                var writer = JSONWriter()
                #expect(try snapshot.writeObject("Task", created.id, to: &writer))
                #expect(try JSONParser.parse(writer.bytes) == updated.json)
            }

            let deleted = try writer.execute(.delete(collection: "Task", id: created.id, ifVersion: nil))
            #expect(deleted.event.version == 3)
            try store.read { snapshot throws in
                #expect(try snapshot.object("Task", created.id) == nil)
                var history = JSONWriter()
                let page = try snapshot.writeHistory("Task", created.id, after: 0, limit: 100, to: &history)
                #expect(page.found && page.next == nil)
                guard case .array(let events) = try JSONParser.parse(history.bytes) else {
                    Issue.record("history is not an array")
                    return
                }
                #expect(events.map { $0.objectValue?["type"] } == ["created", "updated", "deleted"])
                #expect(events.map { $0.objectValue?["version"] } == [1, 2, 3])
                #expect(try snapshot.head().sequence == 3)
            }
        }
    }

    @Test func staleVersionsConflictAndChangeNothing() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            let object = try writer.create("Task", ["n": 1])
            #expect {
                try writer.execute(.update(collection: "Task", id: object.id, patch: ["n": 2], ifVersion: 7))
            } throws: { error in
                guard case .conflict(let conflict) = error as? StoreError else { return false }
                return conflict.reason == .version(expected: 7, current: 1)
            }
            #expect(throws: StoreError.notFound(collection: "Task", id: "nope")) {
                try writer.execute(.delete(collection: "Task", id: "nope", ifVersion: nil))
            }
            try store.read { snapshot throws in
                #expect(try snapshot.object("Task", object.id)?.data == ["n": 1] as JSONObject)
                #expect(try snapshot.head().sequence == 1, "failed commands leave no event")
            }
        }
    }

    @Test func clientIDsMustBeFreeAndARecreatedObjectContinuesItsVersions() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            _ = try writer.create("Student", ["name": "Kim"], id: "s-1")
            #expect(throws: (any Error).self) { try writer.create("Student", ["name": "Lee"], id: "s-1") }
            try writer.execute(.delete(collection: "Student", id: "s-1", ifVersion: 1))
            let again = try writer.create("Student", ["name": "Lee"], id: "s-1")
            #expect(again.version == 3)
            // An id that extends another's is an object of its own: s-1's record and history
            // (which sort right before s-10's) are not s-10's.
            try writer.execute(.delete(collection: "Student", id: "s-1", ifVersion: 3))
            #expect(try writer.create("Student", ["name": "Ray"], id: "s-10").version == 1)
            #expect(throws: (any Error).self) { try writer.create("Student", ["name": "Ray"], id: "s-10") }
            #expect(try writer.create("Student", ["name": "Lee"], id: "s-1").version == 5)
            #expect(try writer.create("Student", ["name": "Sam"], id: "s-").version == 1)
            // Replaying the log checks each create against the same record and history.
            let digest = try store.read { try $0.digest() }
            try store.rebuild()
            #expect(try store.read { try $0.digest() } == digest)
        }
    }

    @Test func generatedIDsAreUniqueAndOrderedByCreation() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            var ids: [String] = []
            for index in 0..<300 {
                if index % 100 == 0 { writer.clock -= 50 }  // a clock that steps back
                ids.append(try writer.create("Task", ["i": .int(Int64(index))]).id)
            }
            #expect(Set(ids).count == ids.count)
            #expect(ids == ids.sorted())
        }
    }

    @Test func eventsRoundTripThroughTheirCanonicalBytes() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            let object = try writer.create(
                "Photo",
                ["taken": ["$date": "2026-01-02T03:04:05.678+01:00"], "of": ["$ref": "Student/s-1"], "size": 1.5])
            try writer.execute(.update(collection: "Photo", id: object.id, patch: ["size": 2e300], ifVersion: nil))
            try writer.execute(
                .defineView(
                    try ViewDefinition(
                        name: "big", collection: "Photo", whereJSON: ["size": ["$gt": 2]],
                        sort: SortOrder(parsing: ["-size"]), unique: true)))
            try store.read { snapshot throws in
                for sequence in 1...3 {
                    let event = try #require(try snapshot.event(UInt64(sequence)))
                    let bytes = event.encoded()
                    let decoded = try bytes.withUnsafeBytes { try Event(decoding: $0) }
                    #expect(decoded == event)
                    #expect(decoded.encoded() == bytes)
                }
            }
        }
    }

    /// Many commands in one transaction, as the writer batches them: each failure leaves no trace and
    /// the rest stand, whether commands run checked-then-applied or each in a nested transaction.
    @Test(arguments: [false, true])
    func commandsInOneTransactionFailIndependently(isolating: Bool) throws {
        try withTemporaryDirectory { root in
            let store = try Store(directory: root + "/live")
            let helper = TestWriter(store)
            try helper.execute(
                .defineView(
                    try ViewDefinition(
                        name: "byCode", collection: "Item", whereJSON: nil, sort: SortOrder(parsing: ["code"]),
                        unique: true)))
            var outcomes: [Bool] = []
            try store.write { writer in
                writer.isolatesEveryCommand = isolating
                let acceptance = Acceptance(
                    timestamp: Timestamp(milliseconds: 1_800_000_000_000), origin: helper.origin)
                let commands: [Command] = [
                    .create(collection: "Item", id: "a", data: ["code": 1]),
                    .create(collection: "Item", id: "a", data: ["code": 2]),  // id taken
                    .create(collection: "Item", id: "b", data: ["code": 1]),  // unique code taken
                    .update(collection: "Item", id: "nope", patch: ["code": 3], ifVersion: nil),  // missing
                    .create(collection: "Item", id: "c", data: ["code": 3]),
                    .update(collection: "Item", id: "c", patch: ["code": 1], ifVersion: nil),  // unique code taken
                    .update(collection: "Item", id: "c", patch: ["code": 4], ifVersion: 9),  // stale version
                    .update(collection: "Item", id: "c", patch: ["code": 5], ifVersion: 1),
                    .create(collection: "Item", id: "d", data: ["code": 3]),  // 3 is free again
                    .delete(collection: "Item", id: "a", ifVersion: nil),
                    .create(collection: "Item", id: "e", data: ["code": 1]),  // 1 is free again
                ]
                for command in commands {
                    do {
                        _ = try writer.execute(command, acceptance, ids: &helper.ids)
                        outcomes.append(true)
                    } catch let error as StoreError {
                        #expect(error.isConflict || error == .notFound(collection: "Item", id: "nope"))
                        outcomes.append(false)
                    }
                }
            }
            #expect(outcomes == [true, false, false, false, true, false, false, true, true, true, true])
            try store.read { snapshot throws in
                #expect(try snapshot.head().sequence == 7)
                #expect(try snapshot.object("Item", "c")?.data == ["code": 5])
                #expect(try snapshot.object("Item", "a") == nil)
                #expect(try snapshot.views().first?.count == 3)
            }
            let replayed = try replay(store, into: root + "/replayed")
            #expect(try store.differences(from: replayed) == [])
            #expect(try store.verify(scratchDirectory: root + "/scratch").isConsistent)
        }
    }

    @Test func replayingTheLogReproducesEveryDerivedByte() throws {
        try withTemporaryDirectory { root in
            let store = try Store(directory: root + "/live")
            let writer = TestWriter(store)
            var random = SeededGenerator(seed: 7)
            try runRandomWorkload(writer, steps: 3000, random: &random)
            let replayed = try replay(store, into: root + "/replayed")
            #expect(try store.differences(from: replayed) == [])
            try store.read { snapshot throws in #expect(try snapshot.head().sequence > 2500) }

            try store.rebuild()
            #expect(try store.differences(from: replayed) == [])
        }
    }
}

/// Creates, updates (including ones that move objects in and out of views) and deletes across
/// collections, with views defined and dropped along the way. Failed commands are part of it.
func runRandomWorkload(_ writer: TestWriter, steps: Int, random: inout SeededGenerator) throws {
    var live: [(collection: String, id: String)] = []
    let collections = ["Task", "Student", "Item"]
    let words = ["apple", "Banana", "cherry", "date", "Éclair", "fig", "", "grape\u{0}x"]
    func randomValue() -> JSON {
        switch Int.random(in: 0..<8, using: &random) {
        case 0: return .int(Int64.random(in: -5...5, using: &random))
        case 1: return .double(Double(Int.random(in: -20...20, using: &random)) / 4)
        case 2: return .string(words.randomElement(using: &random)!)
        case 3: return .bool(Bool.random(using: &random))
        case 4: return .null
        case 5: return ["$date": .string("2026-0\(Int.random(in: 1...9, using: &random))-01T00:00:00Z")]
        case 6: return .array([.int(Int64.random(in: 0...3, using: &random))])
        default: return ["city": .string(words.randomElement(using: &random)!)]
        }
    }
    func randomData() -> JSONObject {
        var data = JSONObject()
        for key in ["title", "n", "done", "address"] where Bool.random(using: &random) { data[key] = randomValue() }
        return data
    }
    for step in 0..<steps {
        let roll = Int.random(in: 0..<100, using: &random)
        do {
            if step == steps / 4 {
                try writer.execute(
                    .defineView(
                        try ViewDefinition(
                            name: "byTitle", collection: "Task", whereJSON: nil,
                            sort: SortOrder(parsing: ["title", "-n"]), unique: false)))
                try writer.execute(
                    .defineView(
                        try ViewDefinition(
                            name: "open", collection: "Task", whereJSON: ["done": ["$ne": true]],
                            sort: SortOrder(parsing: ["-n"]), unique: false)))
                try writer.execute(
                    .defineView(
                        try ViewDefinition(
                            name: "uniqueN", collection: "Item", whereJSON: ["n": ["$exists": true]],
                            sort: SortOrder(parsing: ["n"]), unique: true)))
            } else if step == steps / 2 {
                try writer.execute(.dropView(name: "open"))
            } else if roll < 45 || live.isEmpty {
                let collection = collections.randomElement(using: &random)!
                let object = try writer.create(collection, .object(randomData()))
                live.append((collection, object.id))
            } else if roll < 85 {
                let target = live.randomElement(using: &random)!
                var patch = randomData()
                if Bool.random(using: &random) { patch["title"] = .null }
                try writer.execute(.update(collection: target.collection, id: target.id, patch: patch, ifVersion: nil))
            } else {
                let index = Int.random(in: 0..<live.count, using: &random)
                try writer.execute(.delete(collection: live[index].collection, id: live[index].id, ifVersion: nil))
                live.remove(at: index)
            }
        } catch let error as StoreError where error.isConflict {
            // A unique view refused it: part of the workload.
        }
    }
}
