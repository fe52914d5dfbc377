import FolioJSON
import FolioModel
import LMDB

/// Delete rules (`Schema.Field.onTargetDelete`, `owns`): what deleting or updating an object does to
/// the objects that refer to it and to the objects it owns. Each consequence is an event of its own,
/// appended right after the command's in the same transaction, with `cause` set to the event that
/// made it. Rules apply transitively; an object is deleted at most once, so cycles end; a `deny`
/// anywhere throws, and the caller's nested transaction takes everything back.
extension StoreWriter {
    private enum Consequence {
        case delete(collection: String, id: String, cause: UInt64)
        /// Remove the reference to `target` from `field` of the object.
        case nullify(collection: String, id: String, field: String, target: Reference, cause: UInt64)
        /// Delete the object if no owning reference to it is left.
        case releaseOwned(collection: String, id: String, cause: UInt64)
    }

    /// The referrers named in a `deny` conflict, or in the conflict of a file delete, at most.
    static let deniedReferrersShown = 10

    /// Throws `conflict` naming the first records that refer to the file, if any do.
    func checkUnreferenced(file name: String, _ txn: StoreTransaction) throws {
        let (referrers, count) = try store.applier.references.referrers(
            of: FileName.collection, name, limit: Self.deniedReferrersShown, txn)
        guard count > 0 else { return }
        let shown =
            referrers.map { "\($0.collection)/\($0.id) (\($0.path))" }.joined(separator: ", ")
            + (count > referrers.count ? ", ..." : "")
        throw StoreError.conflict(
            Conflict(
                .fileReferenced(referrers: referrers, count: count),
                "file \(Names.quoted(name)) is referred to by \(count) record(s): \(shown); "
                    + "delete it with \"force\": true to leave their references dangling"))
    }

    func applyDeleteRules(
        after applied: Applied, before: StoredObject?, after object: StoredObject?, _ acceptance: Acceptance,
        _ txn: StoreTransaction
    ) throws -> [Applied] {
        var pending: [Consequence] = []
        switch applied.event.change {
        case .deleted(let collection, let id):
            guard let before else { return [] }
            try consequences(ofDeleting: collection, id, before, cause: applied.event.sequence, into: &pending, txn)
        case .updated(let collection, _, _, _):
            guard let before, let object, let schema = try store.applier.catalog.schema(collection, txn),
                schema.hasOwningFields
            else { return [] }
            let owned = { (data: JSONObject) in
                Set(Reference.all(in: data).filter { schema.rules(at: $0.path)?.owns == true }.map(\.target))
            }
            for target in owned(before.data).subtracting(owned(object.data)).sorted() {
                let (targetCollection, targetID) = Self.split(target)
                pending.append(.releaseOwned(collection: targetCollection, id: targetID, cause: applied.event.sequence))
            }
        default:
            return []
        }
        var made: [Applied] = []
        var index = 0
        while index < pending.count {
            let consequence = pending[index]
            index += 1
            switch consequence {
            case .delete(let collection, let id, let cause):
                guard let old = try store.applier.objects.get(collection, id, txn.lmdb) else { continue }
                let deleted = try append(
                    event(.deleted(collection: collection, id: id), acceptance, version: old.version + 1, cause: cause),
                    txn,
                    before: .known(old, after: nil))
                made.append(deleted)
                try consequences(ofDeleting: collection, id, old, cause: deleted.event.sequence, into: &pending, txn)
            case .nullify(let collection, let id, let field, let target, let cause):
                guard let old = try store.applier.objects.get(collection, id, txn.lmdb) else { continue }
                let reference: JSON = ["$ref": .string(target.target)]
                let operation: FieldOperations.Operation
                switch old.data[field] {
                case .array(let elements)? where elements.contains(where: { Value($0) == Value(reference) }):
                    operation = .pull([reference])
                case let value? where Value(value) == Value(reference):
                    operation = .set(.null)
                default:
                    continue
                }
                let ops = FieldOperations([FieldOperations.Entry(path: [field], operation: operation)])
                let change = event(
                    .updated(collection: collection, id: id, patch: JSONObject(), ops: ops), acceptance,
                    version: old.version + 1, cause: cause)
                let new: StoredObject?
                do { new = try change.applied(to: old) } catch { throw StoreError(error) }
                if let new, let schema = try store.applier.catalog.schema(collection, txn) {
                    do { try schema.validate(new.data) } catch {
                        throw StoreError.invalid("nullifying \(field) of \(collection)/\(id): \(error.message)")
                    }
                }
                let views = try store.applier.checkTrees(from: old, to: new, txn)
                made.append(try append(change, txn, before: .known(old, after: new, views: views)))
            case .releaseOwned(let collection, let id, let cause):
                guard try store.applier.objects.record(collection, id, txn.lmdb) != nil else { continue }
                guard try !isOwned(collection, id, txn) else { continue }
                pending.append(.delete(collection: collection, id: id, cause: cause))
            }
        }
        return made
    }

    /// What deleting `collection/id` (whose data was `object`) makes happen: the rules of the fields
    /// that refer to it, then the release of what it owned. Throws `conflict` on a `deny`.
    private func consequences(
        ofDeleting collection: String, _ id: String, _ object: StoredObject, cause: UInt64,
        into pending: inout [Consequence],
        _ txn: StoreTransaction
    ) throws {
        let applier = store.applier
        var denied: [String] = []
        for (sourceCollection, path) in try applier.references.groups(collection: collection, id: id, txn) {
            guard let rules = try applier.catalog.schema(sourceCollection, txn)?.rules(at: path) else { continue }
            switch rules.onTargetDelete {
            case .keep:
                continue
            case .deny:
                let shown = try applier.references.sources(
                    of: collection, id, from: sourceCollection, path: path,
                    limit: Self.deniedReferrersShown - denied.count, txn)
                denied += shown.ids.map { "\(sourceCollection)/\($0)" }
            case .nullify, .cascade:
                let target = Reference(path: path, collection: collection, id: id)
                for source in try applier.references.sources(
                    of: collection, id, from: sourceCollection, path: path, limit: .max, txn
                ).ids {
                    if rules.onTargetDelete == .cascade {
                        pending.append(.delete(collection: sourceCollection, id: source, cause: cause))
                    } else {
                        pending.append(
                            .nullify(
                                collection: sourceCollection, id: source, field: path, target: target, cause: cause))
                    }
                }
            }
            if denied.count >= Self.deniedReferrersShown { break }
        }
        if !denied.isEmpty {
            throw StoreError.conflict(
                Conflict(
                    .denied(referrers: denied),
                    "cannot delete \(collection)/\(id): it is referred to from fields whose onTargetDelete is deny, by \(denied.joined(separator: ", "))"
                ))
        }
        guard let schema = try applier.catalog.schema(collection, txn), schema.hasOwningFields else { return }
        for reference in Reference.all(in: object.data) where schema.rules(at: reference.path)?.owns == true {
            pending.append(.releaseOwned(collection: reference.collection, id: reference.id, cause: cause))
        }
    }

    /// Whether an owning reference to the object is left anywhere.
    private func isOwned(_ collection: String, _ id: String, _ txn: StoreTransaction) throws -> Bool {
        for (sourceCollection, path) in try store.applier.references.groups(collection: collection, id: id, txn)
        where try store.applier.catalog.schema(sourceCollection, txn)?.rules(at: path)?.owns == true {
            return true
        }
        return false
    }

    static func split(_ target: String) -> (collection: String, id: String) {
        let slash = target.firstIndex(of: "/")!
        return (String(target[..<slash]), String(target[target.index(after: slash)...]))
    }
}
