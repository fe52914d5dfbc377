import FolioJSON
import FolioModel
import Foundation
import Testing

@testable import FolioStore

/// Field operations, batches, schemas, references with their delete rules, and request keys, in
/// the store: each checked against what it must do, then against a replay of the log.
@Suite struct DataModelTests {
    private func schema(_ json: JSON) throws -> Schema { try Schema(parsing: json) }

    private func data(_ store: Store, _ collection: String, _ id: String) throws -> JSONObject? {
        try store.read { try $0.object(collection, id)?.data }
    }

    /// The store's log replayed into a new store has the same digest and no differences.
    private func expectReplayMatches(_ store: Store) throws {
        try withTemporaryDirectory { path in
            let copy = try replay(store, into: path)
            defer { copy.close() }
            #expect(try copy.read { try $0.digest() } == store.read { try $0.digest() })
            #expect(try store.differences(from: copy) == [])
        }
        let report = try withTemporaryDirectory { path in try store.verify(scratchDirectory: path + "/scratch") }
        #expect(report.isConsistent, "\(report.mismatches)")
    }

    private func ops(_ json: JSON) throws -> FieldOperations {
        var found = false
        return try FieldOperations(parsing: json, beside: nil, results: 0..<10, found: &found)
    }

    @Test func fieldOperationsApplyAndReplay() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            _ = try writer.create("Task", ["n": 1, "tags": ["a", "b"], "stats": ["views": 1.5]], id: "t")
            try writer.execute(
                .update(
                    collection: "Task", id: "t", patch: ["title": "x"],
                    ops: try ops([
                        "n": ["$inc": 2], "tags": ["$push": ["c", "a"]], "stats.views": ["$inc": 1],
                        "stats.likes": ["$inc": -1],
                        "set": ["$addToSet": [1, 1.0, 2]],
                    ]), ifVersion: 1))
            #expect(
                try data(store, "Task", "t") == [
                    "n": 3, "tags": ["a", "b", "c", "a"], "stats": ["views": 2.5, "likes": -1], "title": "x",
                    "set": [1, 2],
                ])
            try writer.execute(
                .update(
                    collection: "Task", id: "t", patch: [:],
                    ops: try ops(["tags": ["$pull": ["a"]], "n": ["$unset": true], "set": ["$addToSet": [2.0, 3]]]),
                    ifVersion: nil))
            #expect(
                try data(store, "Task", "t") == [
                    "tags": ["b", "c"], "stats": ["views": 2.5, "likes": -1], "title": "x", "set": [1, 2, 3],
                ])
            // Wrong kinds are refused, naming the field, and change nothing.
            for (operations, named) in [
                (["title": ["$inc": 1]] as JSON, "title"), (["title": ["$push": [1]]], "title"),
                (["title.deep": ["$inc": 1]], "title"),
                (["big": ["$inc": .int(Int64.max)]], "big"),
            ] {
                if named == "big" {
                    try writer.execute(.update(collection: "Task", id: "t", patch: ["big": 1], ifVersion: nil))
                }
                let version = try store.read { try $0.object("Task", "t")!.version }
                #expect {
                    try writer.execute(
                        .update(collection: "Task", id: "t", patch: [:], ops: try ops(operations), ifVersion: nil))
                } throws: { error in
                    guard case .invalid(let message) = error as? StoreError else { return false }
                    return message.contains(named)
                }
                #expect(try store.read { try $0.object("Task", "t")!.version } == version)
            }
            // The patch and the operations may not touch one field.
            #expect(throws: ValidationError.self) {
                try FieldOperations(parsing: ["a.b": ["$inc": 1]], beside: ["a": ["b": 1]])
            }
            #expect(throws: ValidationError.self) {
                try FieldOperations(parsing: ["a": ["$inc": 1], "a.b": ["$unset": true]], beside: nil)
            }
            try expectReplayMatches(store)
        }
    }

    @Test func anAtomicBatchIsAllOrNothingAtEveryPosition() throws {
        for failing in 0..<4 {
            try withTemporaryStore { store in
                let writer = TestWriter(store)
                _ = try writer.create("Category", ["title": "Home", "items": []], id: "c1")
                var operations = [
                    BatchOperation(
                        command: .create(collection: "Item", id: "i1", data: ["title": "Mop"]), idResult: nil,
                        hasResultValues: false),
                    BatchOperation(
                        command: .create(
                            collection: "Item", id: nil, data: ["title": "Broom", "twin": ["$result": 0]]),
                        idResult: nil, hasResultValues: true),
                    BatchOperation(
                        command: .update(
                            collection: "Category", id: "c1", patch: [:],
                            ops: try ops(["items": ["$push": [["$result": 0], ["$result": 1]]]]), ifVersion: 1),
                        idResult: nil, hasResultValues: true),
                    BatchOperation(
                        command: .update(collection: "Item", id: "", patch: ["done": false], ops: nil, ifVersion: nil),
                        idResult: 1, hasResultValues: false),
                ]
                // Make op `failing` fail: a taken id, a missing object, a stale version.
                switch failing {
                case 0: _ = try writer.create("Item", ["title": "taken"], id: "i1")
                case 1:
                    operations[1] = BatchOperation(
                        command: .update(collection: "Item", id: "nope", patch: [:], ops: nil, ifVersion: nil),
                        idResult: nil, hasResultValues: false)
                case 2:
                    try writer.execute(
                        .update(collection: "Category", id: "c1", patch: ["title": "Home!"], ifVersion: nil))
                default:
                    operations[3] = BatchOperation(
                        command: .update(
                            collection: "Item", id: "", patch: [:], ops: try ops(["title": ["$inc": 1]]), ifVersion: nil
                        ), idResult: 1, hasResultValues: false)
                }
                let head = try store.read { try $0.head() }
                let digest = try store.read { try $0.digest() }
                #expect {
                    try writer.write(.batch(operations, atomic: true))
                } throws: { error in
                    guard case .batchFailed(let index, _) = error as? StoreError else { return false }
                    return index == failing
                }
                #expect(try store.read { try $0.head() } == head)
                #expect(try store.read { try $0.digest() } == digest)
            }
        }
        // Without a failure: contiguous events, one result per op, $result resolved.
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            _ = try writer.create("Category", ["title": "Home", "items": []], id: "c1")
            let outcome = try writer.write(
                .batch(
                    [
                        BatchOperation(
                            command: .create(collection: "Item", id: nil, data: ["title": "Mop"]), idResult: nil,
                            hasResultValues: false),
                        BatchOperation(
                            command: .update(
                                collection: "Category", id: "c1", patch: [:],
                                ops: try ops(["items": ["$push": [["$result": 0]]]]), ifVersion: 1),
                            idResult: nil, hasResultValues: true),
                    ], atomic: true))
            #expect(outcome.appended.map(\.event.sequence) == [2, 3])
            let item = outcome.appended[0].event.object!.id
            #expect(try data(store, "Category", "c1")?["items"] == [["$ref": .string("Item/" + item)]])
            guard case .batch(let items) = outcome.result else {
                Issue.record("not a batch result")
                return
            }
            #expect(items.count == 2)
            try expectReplayMatches(store)
        }
    }

    @Test func aBatchThatIsNotAtomicKeepsWhatSucceeds() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            let outcome = try writer.write(
                .batch(
                    [
                        BatchOperation(
                            command: .create(collection: "T", id: "a", data: [:]), idResult: nil, hasResultValues: false
                        ),
                        BatchOperation(
                            command: .delete(collection: "T", id: "missing", ifVersion: nil), idResult: nil,
                            hasResultValues: false),
                        BatchOperation(
                            command: .update(
                                collection: "T", id: "", patch: ["x": ["$result": 0]], ops: nil, ifVersion: nil),
                            idResult: 1, hasResultValues: true),
                        BatchOperation(
                            command: .delete(collection: "T", id: "", ifVersion: nil), idResult: 0,
                            hasResultValues: false),
                    ], atomic: false))
            guard case .batch(let items) = outcome.result else {
                Issue.record("not a batch result")
                return
            }
            let failed = items.map { if case .failure = $0 { return true } else { return false } }
            #expect(failed == [false, true, true, false])
            #expect(outcome.appended.count == 2)
            #expect(try store.read { try $0.object("T", "a") } == nil)
        }
    }

    @Test func schemasCheckEveryWriteAndRefuseDataThatDoesNotFit() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            _ = try writer.create("Report", ["day": ["$date": "2026-12-01T00:00:00Z"], "n": 1], id: "r1")
            _ = try writer.create("Report", ["day": "yesterday", "n": 1.5], id: "r2")
            _ = try writer.create("Report", ["n": 2], id: "r3")
            let reportSchema = try schema([
                "collection": "Report",
                "fields": [
                    "day": ["type": "date", "required": true], "n": ["type": "integer"],
                    "photos": ["type": "array", "items": ["type": "string"]],
                ],
            ])
            #expect {
                try writer.execute(.defineSchema(reportSchema))
            } throws: { error in
                guard case .schemaViolations(_, let count, let violations) = error as? StoreError else { return false }
                return count == 2 && violations.map(\.id) == ["r2", "r3"]
                    && violations[0].reason == "field \"day\": expected date, got string"
                    && violations[1].reason.contains("required")
            }
            try writer.execute(
                .update(
                    collection: "Report", id: "r2", patch: ["day": ["$date": "2026-12-02T00:00:00Z"], "n": 2],
                    ifVersion: nil))
            try writer.execute(.delete(collection: "Report", id: "r3", ifVersion: nil))
            try writer.execute(.defineSchema(reportSchema))
            for (bad, message) in [
                (["day": "x"] as JSONObject, "field \"day\": expected date, got string"),
                (["day": ["$date": "2026-12-01T00:00:00Z"], "n": 1.5], "expected integer, got number"),
                (["day": ["$date": "2026-12-01T00:00:00Z"], "photos": ["a", 1]], "photos[1]"), ([:], "required"),
            ] {
                #expect {
                    try writer.create("Report", .object(bad))
                } throws: { error in
                    guard case .invalid(let text) = error as? StoreError else { return false }
                    return text.contains(message)
                }
            }
            #expect(throws: StoreError.self) {
                try writer.execute(.update(collection: "Report", id: "r1", patch: ["day": .null], ifVersion: nil))
            }
            #expect(throws: StoreError.self) {
                try writer.execute(
                    .update(
                        collection: "Report", id: "r1", patch: [:], ops: try ops(["n": ["$inc": 0.5]]), ifVersion: nil))
            }
            _ = try writer.create("Report", ["day": ["$date": "2026-12-03T00:00:00Z"], "extra": true])
            try writer.execute(.dropSchema(collection: "Report"))
            _ = try writer.create("Report", ["day": 7])
            #expect(throws: StoreError.self) { try writer.execute(.dropSchema(collection: "Report")) }
            try expectReplayMatches(store)
        }
    }

    /// The Realm categories app: a category owns its items; items know their category by backlink.
    @Test func ownedObjectsGoWithTheirLastOwner() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            try writer.execute(
                .defineSchema(
                    try schema([
                        "collection": "Category",
                        "fields": ["items": ["type": "array", "items": ["type": "ref", "ref": "Item"], "owns": true]],
                    ])))
            for id in ["i1", "i2", "i3", "i4"] { _ = try writer.create("Item", ["title": .string(id)], id: id) }
            _ = try writer.create(
                "Category", ["items": [["$ref": "Item/i1"], ["$ref": "Item/i2"], ["$ref": "Item/i3"]]], id: "home")
            _ = try writer.create("Category", ["items": [["$ref": "Item/i3"]]], id: "garden")
            let backlinks = try store.read { snapshot in
                try store.applier.references.sources(
                    of: "Item", "i3", from: "Category", path: "items", limit: 10, snapshot.storeTxn)
            }
            #expect(backlinks.ids == ["garden", "home"] && backlinks.total == 2)
            // Replacing the list orphans i2, which goes; i1 stays in the new list.
            let replaced = try writer.write(
                .update(
                    collection: "Category", id: "home",
                    patch: ["items": [["$ref": "Item/i1"], ["$ref": "Item/i3"], ["$ref": "Item/i4"]]], ifVersion: nil))
            #expect(replaced.appended.map(\.event.typeName) == ["updated", "deleted"])
            #expect(
                replaced.appended[1].event.object?.id == "i2"
                    && replaced.appended[1].event.cause == replaced.appended[0].event.sequence)
            // Deleting home takes i1 and i4, not i3, which garden owns too.
            let deleted = try writer.write(.delete(collection: "Category", id: "home", ifVersion: nil))
            #expect(deleted.appended.map { $0.event.object!.id } == ["home", "i1", "i4"])
            #expect(deleted.appended.dropFirst().allSatisfy { $0.event.cause == deleted.appended[0].event.sequence })
            #expect(try store.read { try $0.object("Item", "i3") } != nil)
            let deletedGarden = try writer.write(.delete(collection: "Category", id: "garden", ifVersion: nil))
            #expect(deletedGarden.appended.map { $0.event.object!.id } == ["garden", "i3"])
            try expectReplayMatches(store)
        }
    }

    @Test func deleteRulesNullifyCascadeAndDeny() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            try writer.execute(
                .defineSchema(
                    try schema([
                        "collection": "Task",
                        "fields": [
                            "owner": ["type": "ref", "ref": "User", "onTargetDelete": "nullify"],
                            "watchers": ["type": "array", "items": ["type": "ref"], "onTargetDelete": "nullify"],
                            "project": ["type": "ref", "onTargetDelete": "cascade"],
                        ],
                    ])))
            try writer.execute(
                .defineSchema(
                    try schema([
                        "collection": "Invoice", "fields": ["customer": ["type": "ref", "onTargetDelete": "deny"]],
                    ])))
            _ = try writer.create("User", [:], id: "ann")
            _ = try writer.create("User", [:], id: "bob")
            _ = try writer.create("Project", [:], id: "p")
            _ = try writer.create(
                "Task",
                [
                    "owner": ["$ref": "User/ann"], "watchers": [["$ref": "User/ann"], ["$ref": "User/bob"]],
                    "project": ["$ref": "Project/p"],
                ], id: "t1")
            _ = try writer.create("Task", ["project": ["$ref": "Project/p"], "note": ["$ref": "User/ann"]], id: "t2")
            _ = try writer.create("Invoice", ["customer": ["$ref": "User/bob"]], id: "inv")
            let ann = try writer.write(.delete(collection: "User", id: "ann", ifVersion: nil))
            // The delete, then one event per rule: owner nulled, ann pulled from watchers.
            #expect(
                ann.appended.map(\.event.typeName) == ["deleted", "updated", "updated"],
                "\(ann.appended.map { String(decoding: $0.canonicalEvent, as: UTF8.self) })")
            // owner nulled, ann pulled from watchers; t2's note is not a rule field: it dangles.
            #expect(try data(store, "Task", "t1")?["owner"] == .null)
            #expect(try data(store, "Task", "t1")?["watchers"] == [["$ref": "User/bob"]])
            #expect(try data(store, "Task", "t2")?["note"] == ["$ref": "User/ann"])
            // bob is denied by the invoice: nothing changes, the referrer is named.
            let head = try store.read { try $0.head() }
            #expect {
                try writer.write(.delete(collection: "User", id: "bob", ifVersion: nil))
            } throws: { error in
                guard case .conflict(let conflict) = error as? StoreError, case .denied(let referrers) = conflict.reason
                else { return false }
                return referrers == ["Invoice/inv"]
            }
            #expect(try store.read { try $0.head() } == head)
            #expect(try data(store, "Task", "t1")?["watchers"] == [["$ref": "User/bob"]])
            // Deleting the project cascades to both tasks.
            let project = try writer.write(.delete(collection: "Project", id: "p", ifVersion: nil))
            #expect(project.appended.map { $0.event.object!.id } == ["p", "t1", "t2"])
            try expectReplayMatches(store)
        }
    }

    @Test func cyclesOfCascadesEnd() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            try writer.execute(
                .defineSchema(
                    try schema([
                        "collection": "Node",
                        "fields": ["next": ["type": "ref", "onTargetDelete": "cascade", "owns": true]],
                    ])))
            _ = try writer.create("Node", ["next": ["$ref": "Node/b"]], id: "a")
            _ = try writer.create("Node", ["next": ["$ref": "Node/c"]], id: "b")
            _ = try writer.create("Node", ["next": ["$ref": "Node/a"]], id: "c")
            let deleted = try writer.write(.delete(collection: "Node", id: "a", ifVersion: nil))
            #expect(Set(deleted.appended.map { $0.event.object!.id }) == ["a", "b", "c"])
            #expect(deleted.appended.count == 3)
            try expectReplayMatches(store)
        }
    }

    @Test func requestKeysReplayTheFirstResult() throws {
        try withTemporaryDirectory { path in
            var options = Store.Options()
            options.requestKeyRetention = 60_000
            let store = try Store(directory: path, options: options)
            let writer = TestWriter(store)
            let first = try writer.write(.create(collection: "T", id: nil, data: ["n": 1]), requestKey: "k1")
            let again = try writer.write(.create(collection: "T", id: nil, data: ["n": 1]), requestKey: "k1")
            #expect(!first.replayed && again.replayed && again.appended.isEmpty)
            guard case .object(let wire1) = first.result, case .object(let wire2) = again.result else {
                Issue.record("no object")
                return
            }
            #expect(wire1 == wire2)
            #expect(try store.read { try $0.head().sequence } == 1)
            #expect {
                try writer.write(.create(collection: "T", id: nil, data: ["n": 2]), requestKey: "k1")
            } throws: { error in
                guard case .conflict(let conflict) = error as? StoreError, case .requestKeyReused = conflict.reason
                else { return false }
                return true
            }
            // A batch that is not atomic replays its failures too, and an update its object as it
            // was then, not as it is now.
            let batch = Command.batch(
                [
                    BatchOperation(
                        command: .create(collection: "T", id: "b1", data: [:]), idResult: nil, hasResultValues: false),
                    BatchOperation(
                        command: .delete(collection: "T", id: "nope", ifVersion: nil), idResult: nil,
                        hasResultValues: false),
                ], atomic: false)
            let batchFirst = try writer.write(batch, requestKey: "k2")
            try writer.execute(.update(collection: "T", id: "b1", patch: ["later": true], ifVersion: nil))
            store.close()
            let reopened = try Store(directory: path, options: options)
            try reopened.rebuild()
            let retry = TestWriter(reopened)
            retry.clock = writer.clock
            let batchAgain = try retry.write(batch, requestKey: "k2")
            #expect(batchAgain.replayed)
            guard case .batch(let a) = batchFirst.result, case .batch(let b) = batchAgain.result else {
                Issue.record("not batches")
                return
            }
            #expect(a.count == 2 && b.count == 2)
            if case .success(.object(let x)) = a[0], case .success(.object(let y)) = b[0] {
                #expect(x == y)
            } else {
                Issue.record("op 0")
            }
            if case .failure(let x) = a[1], case .failure(let y) = b[1] {
                #expect(x.code == y.code && x.description == y.description)
            } else {
                Issue.record("op 1")
            }
            // After the retention the key is forgotten: the request runs again.
            retry.clock += 61_000
            let late = try retry.write(.create(collection: "T", id: nil, data: ["n": 1]), requestKey: "k1")
            #expect(!late.replayed)
            try expectReplayMatches(reopened)
            reopened.close()
        }
    }

    @Test func aTooLongReferencePathIsRefused() throws {
        try withTemporaryStore { store throws in
            let writer = TestWriter(store)
            let key = String(repeating: "k", count: 300)
            #expect(throws: StoreError.self) {
                try writer.create("T", .object([key: .object([key: ["$ref": "User/x"]])]))
            }
            #expect(try store.read { try $0.head().sequence } == 0)
        }
    }
}
