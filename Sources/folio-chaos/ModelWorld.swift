import FolioJSON

/// The client's objects as the model knows them (each in one state while the client runs), with
/// what the earlier commands of a write did to them, and what one more command does: its result, its
/// own event and the events of the delete rules (`RuleSchemas`), worked out from what the rules
/// promise, not from how foliod orders its work.
struct ModelWorld {
    /// The model cannot tell what a command does: an object it reads is in more than one possible
    /// state, or the delete rules would make events whose order on one object is foliod's choice
    /// (an object both nullified and deleted by one command, or nullified twice).
    struct Indeterminate: Error {}

    /// An event the command must append.
    struct Change {
        /// nil for a create whose id foliod chooses.
        let key: ObjectKey?
        /// created, updated or deleted.
        let type: String
        let version: Int64
        var data: JSONObject? = nil
        var patch: JSONObject? = nil
        var ops: JSONObject? = nil
        /// Made by a delete rule, not the command itself.
        var consequence = false
    }

    /// What a command answers when it is applied.
    enum Result {
        /// The object after a create or update (key nil: foliod chose the id).
        case object(ObjectKey?, ObjectState)
        case deleted(ObjectKey, version: Int64)
    }

    struct Failure: Error, CustomStringConvertible {
        let code: String
        /// A version conflict's `currentVersion`.
        var currentVersion: Int64? = nil
        /// A `deny`: the referrers foliod may name ("Pin/id").
        var referrers: Set<String>? = nil

        var description: String {
            code + (currentVersion.map { " (current version \($0))" } ?? "")
                + (referrers.map { " (denied by \($0.sorted()))" } ?? "")
        }
    }

    enum Outcome {
        case applied(Result, [Change])
        case failed(Failure)
    }

    let ledger: ClientLedger
    /// The objects earlier commands changed.
    private(set) var changed: [ObjectKey: ObjectState] = [:]

    init(ledger: ClientLedger) { self.ledger = ledger }

    func state(_ key: ObjectKey) throws(Indeterminate) -> ObjectState {
        if let state = changed[key] { return state }
        guard let possibilities = ledger.objects[key] else { return .neverCreated }
        guard let single = possibilities.single else { throw Indeterminate() }
        return single
    }

    /// The client's objects of `collection` that exist, with their data.
    func present(_ collection: String) throws(Indeterminate) -> [(key: ObjectKey, data: JSONObject)] {
        var found: [(key: ObjectKey, data: JSONObject)] = []
        for key in ledger.keys(in: collection) {
            if let data = try state(key).data { found.append((key, data)) }
        }
        return found
    }

    /// Those of `keys` that do not exist.
    func absent(_ keys: some Sequence<ObjectKey>) throws(Indeterminate) -> [ObjectKey] {
        var found: [ObjectKey] = []
        for key in keys {
            if try !state(key).isPresent { found.append(key) }
        }
        return found
    }

    /// Runs `command` on the world: its outcome, and if applied the world after it. `results[n]` is the
    /// object of op n of the batch (nil if foliod chose its id), `failed` the ops that failed.
    mutating func run(_ command: ModelCommand, results: [ObjectKey?], failed: Set<Int>) throws(Indeterminate)
        -> Outcome
    {
        if command.namedResults.contains(where: failed.contains) { return .failed(Failure(code: "bad_request")) }
        var next = self
        let outcome = try next.apply(command, results)
        if case .applied = outcome { self = next }
        return outcome
    }

    private mutating func apply(_ command: ModelCommand, _ results: [ObjectKey?]) throws(Indeterminate) -> Outcome {
        switch command.action {
        case .create(let data):
            let data = ModelCommand.resolve(data, results)
            guard let key = command.key else {
                return .applied(
                    .object(nil, ObjectState(version: 1, data: data)),
                    [Change(key: nil, type: "created", version: 1, data: data)])
            }
            let prior = try state(key)
            guard !prior.isPresent else { return .failed(Failure(code: "conflict")) }
            let after = ObjectState(version: prior.version + 1, data: data)
            changed[key] = after
            return .applied(
                .object(key, after), [Change(key: key, type: "created", version: after.version, data: data)])
        case .update(let patch, let ops, let ifVersion):
            let key = command.key!
            let prior = try state(key)
            guard let data = prior.data else { return .failed(Failure(code: "not_found")) }
            if let ifVersion, ifVersion != prior.version {
                return .failed(Failure(code: "conflict", currentVersion: prior.version))
            }
            let patch = ModelCommand.resolve(patch, results)
            let ops = ops.map { ModelCommand.resolve($0, results) }
            let patched = MergePatch.apply(patch, to: data)
            guard let updated = ops.map({ FieldOps.apply($0, to: patched) }) ?? patched else {
                return .failed(Failure(code: "bad_request"))
            }
            let after = ObjectState(version: prior.version + 1, data: updated)
            changed[key] = after
            let own = Change(key: key, type: "updated", version: after.version, patch: patch, ops: ops)
            guard key.collection == RuleSchemas.folder else { return .applied(.object(key, after), [own]) }
            // Docs the folder no longer holds, and no other folder owns, go.
            let kept = Set(RuleSchemas.ownedDocs(updated))
            let folders = try present(RuleSchemas.folder)
            var released: [ObjectKey] = []
            for doc in RuleSchemas.ownedDocs(data) where !kept.contains(doc) {
                if try state(doc).isPresent
                    && !folders.contains(where: { RuleSchemas.ownedDocs($0.data).contains(doc) })
                {
                    released.append(doc)
                }
            }
            guard !released.isEmpty else { return .applied(.object(key, after), [own]) }
            switch try deleteWithRules(released, target: nil) {
            case .failure(let failure): return .failed(failure)
            case .success(let consequences): return .applied(.object(key, after), [own] + consequences)
            }
        case .delete(let ifVersion):
            let key = command.key!
            let prior = try state(key)
            guard prior.isPresent else { return .failed(Failure(code: "not_found")) }
            if let ifVersion, ifVersion != prior.version {
                return .failed(Failure(code: "conflict", currentVersion: prior.version))
            }
            switch try deleteWithRules([key], target: key) {
            case .failure(let failure): return .failed(failure)
            case .success(let changes): return .applied(.deleted(key, version: prior.version + 1), changes)
            }
        }
    }

    /// Deletes `start` (the command's `target` first, its own event) and what the rules make of it:
    /// notes of a deleted folder (cascade), docs whose owning folders are all deleted (owns), then a
    /// deleted doc pulled from the folders that hold it and unset from notes (nullify), unless a pin
    /// refers to anything deleted (deny). Which objects are deleted does not depend on the order foliod
    /// takes them in; nullifying an object that is deleted too would, so the model does not guess.
    private mutating func deleteWithRules(_ start: [ObjectKey], target: ObjectKey?) throws(Indeterminate)
        -> Swift.Result<[Change], Failure>
    {
        let folders = try present(RuleSchemas.folder)
        let notes = try present(RuleSchemas.note)
        let docs = try present(RuleSchemas.doc)
        var deleted = start
        var gone = Set(start)
        var grew = true
        while grew {
            grew = false
            for note in notes where !gone.contains(note.key) {
                if let folder = RuleSchemas.target(of: note.data["folder"]), gone.contains(folder) {
                    deleted.append(note.key)
                    gone.insert(note.key)
                    grew = true
                }
            }
            for doc in docs where !gone.contains(doc.key) {
                let owners = folders.filter { RuleSchemas.ownedDocs($0.data).contains(doc.key) }
                if !owners.isEmpty && owners.allSatisfy({ gone.contains($0.key) }) {
                    deleted.append(doc.key)
                    gone.insert(doc.key)
                    grew = true
                }
            }
        }
        let deniers = try present(RuleSchemas.pin).filter { pin in
            !gone.contains(pin.key)
                && ["folder", "doc"].contains { RuleSchemas.target(of: pin.data[$0]).map(gone.contains) ?? false }
        }
        if !deniers.isEmpty {
            return .failure(Failure(code: "conflict", referrers: Set(deniers.map(\.key.description))))
        }
        var changes: [Change] = []
        for key in deleted {
            let prior = try state(key)
            // A deleted referrer that a nullify would also touch: foliod's order decides its events.
            let data = prior.data ?? JSONObject()
            if key != target
                && (RuleSchemas.target(of: data["doc"]).map(gone.contains) == true
                    || RuleSchemas.ownedDocs(data).contains(where: gone.contains))
            {
                throw Indeterminate()
            }
            changed[key] = ObjectState(version: prior.version + 1, data: nil)
            changes.append(Change(key: key, type: "deleted", version: prior.version + 1, consequence: key != target))
        }
        for folder in folders where !gone.contains(folder.key) {
            let held = RuleSchemas.ownedDocs(folder.data).filter(gone.contains)
            guard !held.isEmpty else { continue }
            guard held.count == 1 else { throw Indeterminate() }
            try nullify(folder.key, ["docs": ["$pull": [RuleSchemas.reference(held[0])]]], into: &changes)
        }
        for note in notes where !gone.contains(note.key) {
            if let doc = RuleSchemas.target(of: note.data["doc"]), gone.contains(doc) {
                try nullify(note.key, ["doc": ["$set": .null]], into: &changes)
            }
        }
        return .success(changes)
    }

    private mutating func nullify(_ key: ObjectKey, _ ops: JSONObject, into changes: inout [Change])
        throws(Indeterminate)
    {
        let prior = try state(key)
        guard let data = prior.data, let updated = FieldOps.apply(ops, to: data) else { throw Indeterminate() }
        changed[key] = ObjectState(version: prior.version + 1, data: updated)
        changes.append(
            Change(
                key: key, type: "updated", version: prior.version + 1, patch: JSONObject(), ops: ops, consequence: true)
        )
    }
}
