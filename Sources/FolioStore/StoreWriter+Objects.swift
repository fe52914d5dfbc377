import FolioJSON
import FolioModel
import LMDB

extension StoreWriter {
    /// A create, update or delete: checked completely (version, id, schema, references, every view's
    /// key and unique rule) before it changes anything, then appended, then what delete rules make
    /// of it. The command's own event comes first.
    func executeObjectCommand(
        _ command: Command, _ acceptance: Acceptance, ids: inout ObjectIDGenerator, _ txn: StoreTransaction,
        isolated: Bool
    ) throws -> [Applied] {
        let applier = store.applier
        let change: Event.Change
        var version: UInt64 = 0
        var before: StoredObject?
        switch command {
        case .create(let collection, let givenID, let data):
            let id = givenID ?? ids.next(at: acceptance.timestamp)
            let state = try applier.history.createState(collection, id, txn.lmdb)
            if state.exists {
                // A generated id all but never repeats (time and random bits); if it did, the create
                // is refused like one with a given id, not stored over the other object.
                throw StoreError.conflict(Conflict(.exists, "\(collection)/\(id) already exists"))
            }
            version = state.lastVersion + 1
            change = .created(collection: collection, id: id, data: data)
        case .update(let collection, let id, let patch, let ops, let ifVersion):
            before = try current(collection, id, ifVersion: ifVersion, txn)
            version = before!.version + 1
            change = .updated(collection: collection, id: id, patch: patch, ops: ops)
        case .delete(let collection, let id, let ifVersion):
            before = try current(collection, id, ifVersion: ifVersion, txn)
            version = before!.version + 1
            change = .deleted(collection: collection, id: id)
        default:
            throw StoreError.invalid("\(command.opName) is not an object command")
        }
        let event = event(change, acceptance, version: version)
        let after: StoredObject?
        do { after = try event.applied(to: before) } catch { throw StoreError(error) }
        if let after {
            if let schema = try applier.catalog.schema(after.collection, txn) {
                do { try schema.validate(after.data) } catch { throw StoreError(error) }
            }
            try RefIndex.check(after, references: Reference.all(in: after.data))
        }
        let views = try applier.checkTrees(from: before, to: after, txn)
        let applied: Applied
        do {
            applied = try append(event, txn, before: .known(before, after: after, views: views))
        } catch let error as StoreError where !isolated {
            throw SpoiledTransaction(underlying: error)
        }
        guard isolated else { return [applied] }
        return [applied] + (try applyDeleteRules(after: applied, before: before, after: after, acceptance, txn))
    }

    /// Whether delete rules could make more events of the command, which must then run in a nested
    /// transaction of its own: a delete of an object something refers to, or of an object of a
    /// collection with owning fields; an update in such a collection.
    func mayTriggerRules(_ command: Command, _ txn: StoreTransaction) throws -> Bool {
        let catalog = store.applier.catalog
        switch command {
        case .update(let collection, _, _, _, _):
            return try catalog.schema(collection, txn)?.hasOwningFields ?? false
        case .delete(let collection, let id, _):
            if try catalog.schema(collection, txn)?.hasOwningFields ?? false { return true }
            return try store.applier.references.isReferenced(collection, id, txn)
        default:
            return false
        }
    }

    /// The result of an object command's own event.
    static func result(of applied: Applied) throws -> WriteResult {
        switch applied.event.change {
        case .deleted(_, let id):
            return .deleted(id: id, version: applied.event.version)
        default:
            var writer = JSONWriter(capacity: (applied.record?.count ?? 0) + 128)
            if try !applied.writeObject(to: &writer) { applied.object?.write(to: &writer) }
            return .object(wire: writer.bytes)
        }
    }

    // MARK: Schemas

    /// Refuses a schema that existing objects of its collection do not fit, listing up to 20 of them.
    func checkSchema(_ schema: Schema, _ txn: StoreTransaction) throws {
        var violations: [SchemaViolation] = []
        var count = 0
        try store.applier.objects.forEach(in: schema.collection, txn.lmdb) { object in
            do throws(ValidationError) {
                try schema.validate(object.data)
            } catch {
                count += 1
                if violations.count < 20 { violations.append(SchemaViolation(id: object.id, reason: error.message)) }
            }
            return true
        }
        guard violations.isEmpty else {
            throw StoreError.schemaViolations(collection: schema.collection, count: count, violations)
        }
    }
}

extension Schema {
    var hasOwningFields: Bool { fields.contains(where: \.owns) }

    /// The rules of the field a reference sits at: a top-level field of a reference type.
    func rules(at path: String) -> Field? {
        guard let field = field(named: path), field.type.referencedCollection != nil else { return nil }
        return field
    }
}
