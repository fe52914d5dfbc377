import FolioHarness
import FolioJSON

/// Random model writes: creates, updates (with field operations) and deletes of the client's
/// counters, tasks, folders, docs, notes and pins, a few of them bound to fail, each drawn against the
/// objects as the earlier commands of the same write leave them.
enum ModelWriteGenerator {
    /// A write of `form`, with a new request key when `keyed`; nil when the model cannot tell what it
    /// would do (the client then draws another kind of request).
    static func write(_ random: inout SplitMix64, _ ledger: ClientLedger, form: ModelWrite.Form, keyed: Bool)
        -> ModelWrite?
    {
        let count = form == .single ? 1 : Int.random(in: 2...6, using: &random)
        var world = ModelWorld(ledger: ledger)
        var commands: [ModelCommand] = []
        var results: [ObjectKey?] = []
        var failed = Set<Int>()
        do {
            for _ in 0..<count {
                guard let command = try next(&random, ledger, world, results, batch: form != .single) else { continue }
                switch try world.run(command, results: results, failed: failed) {
                case .applied(.object(let key, _), _): results.append(key)
                case .applied(.deleted, _): results.append(nil)
                case .failed:
                    failed.insert(commands.count)
                    results.append(nil)
                }
                commands.append(command)
            }
            guard !commands.isEmpty else { return nil }
            return try ModelWrite(
                commands: commands, form: form, requestKey: keyed ? ledger.nextName("r") : nil, ledger: ledger)
        } catch {
            return nil
        }
    }

    private enum Choice: CaseIterable {
        case createDoc, createFolder, createNote, createPin, createCounter, increment
        case updateFolder, updateDoc, updateNote, updateTask
        case deleteDoc, deleteFolder, deleteNote, deletePin, deleteTask
        /// An update or delete of an object an earlier op of the batch wrote, by `{"$result": n}`.
        case byResult
        /// Bound to fail: an update of an object that does not exist, a create of one that does.
        case updateMissing, createExisting
    }

    private static let words = ["milk", "dog", "report", "rent", "call", "plan", "fix", "read", "walk", "pay"]

    /// The next command; `results[n]` is the object op n wrote (nil: deleted, failed, or foliod's id).
    private static func next(
        _ random: inout SplitMix64, _ ledger: ClientLedger, _ world: ModelWorld, _ results: [ObjectKey?],
        batch: Bool
    ) throws(ModelWorld.Indeterminate) -> ModelCommand? {
        let docs = try world.present(RuleSchemas.doc)
        let folders = try world.present(RuleSchemas.folder)
        let notes = try world.present(RuleSchemas.note)
        let pins = try world.present(RuleSchemas.pin)
        let counters = try world.present(RuleSchemas.counter)
        var tasks: [(key: ObjectKey, data: JSONObject)] = []
        for key in ledger.keys(in: "Task").suffix(100) {
            if let data = try world.state(key).data { tasks.append((key, data)) }
        }
        var named: [(index: Int, key: ObjectKey)] = []
        for (index, key) in results.enumerated() {
            if let key, try world.state(key).isPresent { named.append((index, key)) }
        }
        let crowded = docs.count + folders.count + notes.count > 40
        func weight(_ choice: Choice) -> Int {
            switch choice {
            case .createDoc: return crowded ? 2 : 10
            case .createFolder: return crowded ? 1 : 6
            case .createNote: return folders.isEmpty ? 0 : crowded ? 1 : 6
            case .createPin: return pins.count < 2 && !(folders.isEmpty && docs.isEmpty) ? 1 : 0
            case .createCounter: return counters.count < 2 ? 5 : 0
            case .increment: return counters.isEmpty ? 0 : 12
            case .updateFolder: return folders.isEmpty ? 0 : 7
            case .updateDoc: return docs.isEmpty ? 0 : 4
            case .updateNote: return notes.isEmpty ? 0 : 3
            case .updateTask: return tasks.isEmpty ? 0 : 3
            case .deleteDoc: return docs.isEmpty ? 0 : crowded ? 8 : 3
            case .deleteFolder: return folders.isEmpty ? 0 : crowded ? 6 : 3
            case .deleteNote: return notes.isEmpty ? 0 : crowded ? 5 : 2
            case .deletePin: return pins.isEmpty ? 0 : 2
            case .deleteTask: return tasks.isEmpty ? 0 : 1
            case .byResult: return batch && !named.isEmpty ? 5 : 0
            case .updateMissing: return 1
            case .createExisting: return docs.isEmpty ? 0 : 1
            }
        }
        var draw = Int.random(in: 0..<Choice.allCases.reduce(0) { $0 + weight($1) }, using: &random)
        let choice = Choice.allCases.first { choice in
            draw -= weight(choice)
            return draw < 0
        }!

        /// A ref to `key`, as `{"$result": n}` now and then when op n of the batch wrote it.
        func refer(_ key: ObjectKey) -> JSON {
            if let index = results.lastIndex(of: key), Bool.random(using: &random) {
                return ["$result": .int(Int64(index))]
            }
            return RuleSchemas.reference(key)
        }
        func ifVersion(_ key: ObjectKey) throws(ModelWorld.Indeterminate) -> Int64? {
            guard Int.random(in: 0..<4, using: &random) == 0 else { return nil }
            let version = try world.state(key).version
            // One in five is stale.
            guard Int.random(in: 0..<5, using: &random) == 0 else { return version }
            return version > 1 && Bool.random(using: &random) ? version - 1 : version + 1
        }
        func newKey(_ collection: String) -> ObjectKey {
            let key = ObjectKey(collection: collection, id: ledger.nextName("k"))
            ledger.track(key)
            return key
        }
        func word() -> JSON { .string(words.randomElement(using: &random)!) }
        let nonce = ledger.nextName("w")
        func create(_ key: ObjectKey?, _ collection: String, _ data: JSONObject) -> ModelCommand {
            var data = data
            data["w"] = .string(nonce)
            return ModelCommand(
                collection: collection, key: key, idResult: nil, action: .create(data: data), nonce: nonce)
        }
        func update(_ key: ObjectKey, _ patch: JSONObject, _ ops: JSONObject?) throws(ModelWorld.Indeterminate)
            -> ModelCommand
        {
            var patch = patch
            patch["w"] = .string(nonce)
            return ModelCommand(
                collection: key.collection, key: key, idResult: nil,
                action: .update(patch: patch, ops: ops, ifVersion: try ifVersion(key)), nonce: nonce)
        }
        func delete(_ key: ObjectKey) throws(ModelWorld.Indeterminate) -> ModelCommand {
            ModelCommand(
                collection: key.collection, key: key, idResult: nil, action: .delete(ifVersion: try ifVersion(key)),
                nonce: nil)
        }
        func increment() -> JSONObject { ["count": ["$inc": .int(Int64.random(in: 1...9, using: &random))]] }

        switch choice {
        case .createDoc:
            // One in four with an id foliod chooses, which no later op names.
            let key = Int.random(in: 0..<4, using: &random) == 0 ? nil : newKey(RuleSchemas.doc)
            return create(key, RuleSchemas.doc, ["title": word(), "n": .int(Int64.random(in: 0...9, using: &random))])
        case .createFolder:
            let held = docs.shuffled(using: &random).prefix(Int.random(in: 0...3, using: &random))
            return create(
                newKey(RuleSchemas.folder), RuleSchemas.folder,
                ["label": word(), "docs": .array(held.map { refer($0.key) })])
        case .createNote:
            let folder = folders.randomElement(using: &random)!
            var data: JSONObject = ["folder": refer(folder.key), "text": word()]
            // Mostly a doc its folder does not own, so that deleting the folder rarely leaves the model unsure.
            let owned = Set(RuleSchemas.ownedDocs(folder.data))
            if Bool.random(using: &random),
                let doc = docs.filter({ !owned.contains($0.key) }).randomElement(using: &random)
            {
                data["doc"] = refer(doc.key)
            }
            return create(newKey(RuleSchemas.note), RuleSchemas.note, data)
        case .createPin:
            let target = (folders + docs).randomElement(using: &random)!.key
            return create(
                newKey(RuleSchemas.pin), RuleSchemas.pin,
                [target.collection == RuleSchemas.folder ? "folder" : "doc": refer(target)])
        case .createCounter:
            let absent = try world.absent(ledger.keys(in: RuleSchemas.counter))
            return create(absent.first ?? newKey(RuleSchemas.counter), RuleSchemas.counter, ["count": 0])
        case .increment:
            return try update(counters.randomElement(using: &random)!.key, [:], increment())
        case .updateFolder:
            let folder = folders.randomElement(using: &random)!
            let held = RuleSchemas.ownedDocs(folder.data)
            let others = docs.filter { !held.contains($0.key) }
            switch Int.random(in: 0..<5, using: &random) {
            case 0 where !others.isEmpty:
                return try update(
                    folder.key, [:], ["docs": ["$push": [refer(others.randomElement(using: &random)!.key)]]])
            case 1 where !held.isEmpty:
                return try update(
                    folder.key, [:], ["docs": ["$pull": [RuleSchemas.reference(held.randomElement(using: &random)!)]]])
            case 2 where !docs.isEmpty:
                return try update(
                    folder.key, [:], ["docs": ["$addToSet": [refer(docs.randomElement(using: &random)!.key)]]])
            case 3:
                // Replaced by merge patch: some docs kept, maybe one more.
                var kept = held.filter { _ in Bool.random(using: &random) }.map(RuleSchemas.reference)
                if let extra = others.randomElement(using: &random), Bool.random(using: &random) {
                    kept.append(refer(extra.key))
                }
                return try update(folder.key, ["docs": .array(kept)], nil)
            default:
                return try update(folder.key, ["label": word()], nil)
            }
        case .updateDoc:
            let doc = docs.randomElement(using: &random)!.key
            switch Int.random(in: 0..<4, using: &random) {
            case 0: return try update(doc, ["title": word()], nil)
            case 1: return try update(doc, [:], ["n": ["$inc": .int(Int64.random(in: -3...9, using: &random))]])
            case 2: return try update(doc, [:], ["tags": ["$push": [word()]]])
            default: return try update(doc, ["title": word()], ["tags": ["$pull": [word()]]])
            }
        case .updateNote:
            let note = notes.randomElement(using: &random)!.key
            switch Int.random(in: 0..<3, using: &random) {
            case 0 where !docs.isEmpty:
                return try update(note, [:], ["doc": ["$set": refer(docs.randomElement(using: &random)!.key)]])
            case 1: return try update(note, ["doc": .null], nil)
            default: return try update(note, [:], ["text": ["$set": word()]])
            }
        case .updateTask:
            let task = tasks.randomElement(using: &random)!.key
            var ops: JSONObject = ["n": ["$inc": .int(Int64.random(in: -3...9, using: &random))]]
            switch Int.random(in: 0..<4, using: &random) {
            case 0: ops["tags"] = ["$push": [word()]]
            case 1: ops["tags"] = ["$pull": [word()]]
            case 2: ops["tags"] = ["$addToSet": [word(), word()]]
            default: ops["meta.x.y"] = ["$inc": 1]
            }
            return try update(task, [:], ops)
        case .deleteDoc: return try delete(docs.randomElement(using: &random)!.key)
        case .deleteFolder: return try delete(folders.randomElement(using: &random)!.key)
        case .deleteNote: return try delete(notes.randomElement(using: &random)!.key)
        case .deletePin: return try delete(pins.randomElement(using: &random)!.key)
        case .deleteTask: return try delete(tasks.randomElement(using: &random)!.key)
        case .byResult:
            let (index, key) = named.randomElement(using: &random)!
            let action: ModelCommand.Action
            // Counters are never deleted: their count is checked over the store's whole life.
            if key.collection != RuleSchemas.counter && Int.random(in: 0..<3, using: &random) == 0 {
                action = .delete(ifVersion: nil)
            } else {
                let patch: JSONObject = key.collection == RuleSchemas.counter ? [:] : ["mark": word()]
                action = .update(
                    patch: patch.merging(["w": .string(nonce)]),
                    ops: key.collection == RuleSchemas.counter ? increment() : nil, ifVersion: nil)
            }
            let isUpdate: Bool
            if case .update = action { isUpdate = true } else { isUpdate = false }
            return ModelCommand(
                collection: key.collection, key: key, idResult: index, action: action, nonce: isUpdate ? nonce : nil)
        case .updateMissing:
            let absent = try world.absent(ledger.keys(in: RuleSchemas.doc).suffix(50))
            return try update(absent.randomElement(using: &random) ?? newKey(RuleSchemas.doc), ["title": word()], nil)
        case .createExisting:
            return create(docs.randomElement(using: &random)!.key, RuleSchemas.doc, ["title": word()])
        }
    }
}

extension JSONObject {
    /// These fields, with `other`'s added (or replacing).
    func merging(_ other: JSONObject) -> JSONObject {
        var merged = self
        for field in other { merged[field.key] = field.value }
        return merged
    }
}
