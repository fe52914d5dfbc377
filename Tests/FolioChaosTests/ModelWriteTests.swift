import FolioJSON
import Testing

@testable import folio_chaos

/// The model of the write ops of issue 10 that needs no foliod: field operations, what delete rules
/// make of a delete or an update, batches, counters and replays.
@Suite struct ModelWriteTests {
    private func key(_ collection: String, _ id: String) -> ObjectKey { ObjectKey(collection: collection, id: id) }

    private func ref(_ collection: String, _ id: String) -> JSON { RuleSchemas.reference(key(collection, id)) }

    /// A ledger whose client has these objects, each at version 1.
    private func ledger(_ objects: [(ObjectKey, JSONObject)]) -> ClientLedger {
        let ledger = ClientLedger(client: 0)
        for (key, data) in objects {
            ledger.track(key)
            ledger.objects[key] = Possibilities(ObjectState(version: 1, data: data))
        }
        return ledger
    }

    private func delete(_ key: ObjectKey) -> ModelCommand {
        ModelCommand(collection: key.collection, key: key, idResult: nil, action: .delete(ifVersion: nil), nonce: nil)
    }

    private func update(_ key: ObjectKey, _ patch: JSONObject, _ ops: JSONObject?, ifVersion: Int64? = nil)
        -> ModelCommand
    {
        ModelCommand(
            collection: key.collection, key: key, idResult: nil,
            action: .update(patch: patch, ops: ops, ifVersion: ifVersion), nonce: patch["w"]?.stringValue)
    }

    /// The events a write must append, as "type key version".
    private func events(_ effect: WriteEffect) -> Set<String> {
        var found = Set<String>()
        for op in effect.ops {
            guard case .applied(_, let changes) = op else { continue }
            for change in changes {
                found.insert(
                    "\(change.consequence ? "+" : "")\(change.type) \(change.key?.description ?? "?") \(change.version)"
                )
            }
        }
        return found
    }

    @Test func fieldOperationsGiveWhatFoliodGave() throws {
        // The answers of a debug foliod to the same two updates.
        var data: JSONObject = ["w": "q"]
        data = try #require(FieldOps.apply(["tags": ["$push": [1, 2]], "m.x": ["$inc": 2]], to: data))
        #expect(data == ["w": "q", "tags": [1, 2], "m": ["x": 2]])
        data = try #require(
            FieldOps.apply(
                ["tags": ["$pull": [1]], "m.x": ["$inc": 2], "t2": ["$addToSet": [3, 3]], "gone": ["$unset": true]],
                to: data))
        #expect(data == ["w": "q", "tags": [2], "m": ["x": 4], "t2": [3]])
        #expect(FieldOps.apply(["n": ["$inc": 1.5]], to: ["n": 1]) == ["n": 2.5])
        #expect(FieldOps.apply(["a": ["$addToSet": [1]]], to: ["a": [1.0]]) == ["a": [1.0]])
        #expect(FieldOps.apply(["a.b": ["$unset": true]], to: [:]) == [:])
        #expect(FieldOps.apply(["n": ["$inc": 1]], to: ["n": "x"]) == nil)
        #expect(FieldOps.apply(["n": ["$push": [1]]], to: ["n": 1]) == nil)
        #expect(FieldOps.apply(["n.x": ["$inc": 1]], to: ["n": 1]) == nil)
    }

    @Test func deletingAFolderDeletesItsNotesAndTheDocsOnlyItOwns() throws {
        let ledger = ledger([
            (key("Folder", "f1"), ["docs": [ref("Doc", "d1"), ref("Doc", "d2")]]),
            (key("Folder", "f2"), ["docs": [ref("Doc", "d2")]]),
            (key("Note", "n1"), ["folder": ref("Folder", "f1"), "doc": ref("Doc", "d3")]),
            (key("Note", "n2"), ["folder": ref("Folder", "f2"), "doc": ref("Doc", "d1")]),
            (key("Doc", "d1"), ["title": "a"]), (key("Doc", "d2"), ["title": "b"]), (key("Doc", "d3"), ["title": "c"]),
        ])
        let effect = try WriteEffect([delete(key("Folder", "f1"))], form: .single, ledger: ledger)
        // d2 stays (f2 owns it too); n2's ref to the deleted d1 is set to null.
        #expect(
            events(effect) == [
                "deleted Folder/f1 2", "+deleted Note/n1 2", "+deleted Doc/d1 2", "+updated Note/n2 2",
            ])
        #expect(effect.after[key("Note", "n2")]?.data == ["folder": ref("Folder", "f2"), "doc": .null])
        #expect(effect.after[key("Doc", "d2")] == nil)
    }

    @Test func aPinAnywhereInTheCascadeDeniesTheWholeDelete() throws {
        let ledger = ledger([
            (key("Folder", "f1"), ["docs": [ref("Doc", "d1")]]), (key("Doc", "d1"), ["title": "a"]),
            (key("Pin", "p1"), ["doc": ref("Doc", "d1")]),
        ])
        let effect = try WriteEffect(
            [update(key("Folder", "f1"), ["w": "x"], nil), delete(key("Folder", "f1"))], form: .batch(atomic: true),
            ledger: ledger)
        #expect(effect.refusal?.failure.code == "conflict")
        #expect(effect.refusal?.failure.referrers == ["Pin/p1"])
        #expect(effect.refusal?.index == 1)
        #expect(effect.ops.isEmpty && effect.after.isEmpty && !effect.writes)
    }

    @Test func pullingADocFromItsLastOwnerDeletesItAndItsNotesLetGo() throws {
        let ledger = ledger([
            (key("Folder", "f1"), ["docs": [ref("Doc", "d1")]]), (key("Doc", "d1"), ["title": "a"]),
            (key("Note", "n1"), ["folder": ref("Folder", "f1"), "doc": ref("Doc", "d1")]),
        ])
        let effect = try WriteEffect(
            [update(key("Folder", "f1"), ["w": "x"], ["docs": ["$pull": [ref("Doc", "d1")]]])], form: .single,
            ledger: ledger)
        #expect(events(effect) == ["updated Folder/f1 2", "+deleted Doc/d1 2", "+updated Note/n1 2"])
    }

    @Test func theModelDoesNotGuessWhereFoliodsOrderDecides() throws {
        // n1 goes with f1 (cascade), and so does d1, to which n1 refers (nullify): whether n1 is
        // nullified before it is deleted depends on the order foliod works in.
        let ledger = ledger([
            (key("Folder", "f1"), ["docs": [ref("Doc", "d1")]]), (key("Doc", "d1"), ["title": "a"]),
            (key("Note", "n1"), ["folder": ref("Folder", "f1"), "doc": ref("Doc", "d1")]),
        ])
        #expect(throws: ModelWorld.Indeterminate.self) {
            try WriteEffect([delete(key("Folder", "f1"))], form: .single, ledger: ledger)
        }
    }

    @Test func aBatchNotAtomicGoesOnPastFailuresAndAResultOfAFailedOpFails() throws {
        let counter = key("Counter", "c1")
        let ledger = ledger([(counter, ["count": 0]), (key("Doc", "d1"), ["title": "a"])])
        let create = ModelCommand(
            collection: "Doc", key: key("Doc", "d1"), idResult: nil, action: .create(data: ["title": "b", "w": "w1"]),
            nonce: "w1")
        let named = ModelCommand(
            collection: "Doc", key: key("Doc", "d1"), idResult: 0,
            action: .update(patch: ["w": "w2"], ops: nil, ifVersion: nil),
            nonce: "w2")
        let commands = [
            create, named, update(counter, ["w": "w3"], ["count": ["$inc": 4]]),
            update(counter, ["w": "w4"], ["count": ["$inc": 5]], ifVersion: 1),
        ]
        let loose = try WriteEffect(commands, form: .batch(atomic: false), ledger: ledger)
        #expect(loose.failures == [0: "conflict", 1: "bad_request", 3: "conflict"])
        #expect(loose.increments == [counter: 4])
        #expect(events(loose) == ["updated Counter/c1 2"])
        let atomic = try WriteEffect(commands, form: .batch(atomic: true), ledger: ledger)
        #expect(atomic.refusal?.index == 0 && atomic.refusal?.failure.code == "conflict")
        #expect(atomic.increments.isEmpty)
        let stale = update(counter, ["w": "w5"], ["count": ["$inc": 5]], ifVersion: 7)
        let single = try WriteEffect([stale], form: .single, ledger: ledger)
        #expect(single.refusal?.index == nil && single.refusal?.failure.currentVersion == 1)
    }

    @Test func aCounterAllowsItsAcknowledgedSumPlusAnySubsetOfTheUnanswered() {
        var tally = CounterTally()
        tally.acknowledge(5)
        tally.leaveUnanswered(3)
        tally.leaveUnanswered(4)
        tally.acknowledge(1)
        #expect([6, 9, 10, 13].allSatisfy(tally.allows))
        #expect(![5, 7, 8, 11, 12, 14].contains(where: tally.allows))
    }

    @Test func aReplayMustBeTheFirstAnswerMarkedReplayed() throws {
        let first = try #require(
            try JSONParser.parse(
                #"{"results":[{"ok":false,"error":{"code":"conflict","message":"Doc/d1 is at version 1, not 5","expectedVersion":5,"currentVersion":1}},{"ok":true,"result":{"collection":"Counter","id":"c1","version":2,"count":3}}]}"#
            ).objectValue)
        let expectation = ReplayExpectation.answer(first)
        var replayed = first
        #expect(expectation.problem(replayed) != nil)
        replayed["replayed"] = true
        #expect(expectation.problem(replayed) == nil)
        // foliod replays a failed op's code and message, not its details.
        let replay = try #require(
            try JSONParser.parse(
                #"{"results":[{"ok":false,"error":{"code":"conflict","message":"Doc/d1 is at version 1, not 5"}},{"ok":true,"result":{"collection":"Counter","id":"c1","version":2,"count":3}}],"replayed":true}"#
            ).objectValue)
        #expect(expectation.problem(replay) == nil)
        let changed = try #require(
            try JSONParser.parse(
                #"{"results":[{"ok":false,"error":{"code":"conflict","message":"Doc/d1 is at version 1, not 5"}},{"ok":true,"result":{"collection":"Counter","id":"c1","version":3,"count":6}}],"replayed":true}"#
            ).objectValue)
        #expect(expectation.problem(changed) != nil)
        let derived = ReplayExpectation.derived(
            batch: false,
            [
                .object(
                    key("Counter", "c1"), ObjectState(version: 2, data: ["count": 3]),
                    updatedAt: "2026-12-01T10:41:14.107Z")
            ]
        )
        #expect(
            derived.problem([
                "collection": "Counter", "id": "c1", "version": 2, "createdAt": "2026-12-01T10:41:14.100Z",
                "updatedAt": "2026-12-01T10:41:14.107Z", "count": 3, "replayed": true,
            ]) == nil)
        #expect(
            derived.problem([
                "collection": "Counter", "id": "c1", "version": 2, "updatedAt": "2026-12-01T10:41:14.108Z", "count": 3,
                "replayed": true,
            ]) != nil)
    }
}
