import FolioJSON
import FolioModel
import LMDB

/// Keeps one tree equal to "the objects of a collection that match a filter, in sort order":
/// a view, or a collection's creation-order index.
struct ViewIndex {
    let name: String
    let collection: String
    let filter: Filter?
    let sort: SortOrder
    let unique: Bool
    let tree: CountedTree

    init(definition: ViewDefinition, tree: CountedTree) {
        name = definition.name
        collection = definition.collection
        filter = definition.filter
        sort = definition.sort
        unique = definition.unique
        self.tree = tree
    }

    /// The creation-order index of a collection.
    init(creationOrderOf collection: String, tree: CountedTree) {
        name = collection
        self.collection = collection
        filter = nil
        sort = .creation
        unique = false
        self.tree = tree
    }

    /// The object's key in the tree, or nil if it does not belong in the view.
    func key(for object: StoredObject?) throws -> [UInt8]? {
        guard let object, filter?.matches(object) ?? true else { return nil }
        let key = sort.key(for: object, id: object.id)
        guard key.count <= CountedTree.maxKeyBytes else {
            throw StoreError.invalid(
                "object \(object.collection)/\(object.id): the values of \(sort) take \(key.count) bytes as a key of view \(Names.quoted(name)); at most \(CountedTree.maxKeyBytes)"
            )
        }
        return key
    }

    /// An object's entry leaving `old` and going to `new` (either nil), as `check` planned it.
    struct Move {
        let old: [UInt8]?
        let new: [UInt8]?
    }

    /// Moves the object's entry from where `old` had it to where `new` needs it; either may be nil
    /// (created, deleted). Throws `conflict` if a unique view already holds the new key; `objects`
    /// gives the holder's values for it.
    func update(from old: StoredObject?, to new: StoredObject?, objects: ObjectTable, _ txn: StoreTransaction) throws {
        guard let move = try plannedMove(from: old, to: new, objects: objects, txn) else { return }
        try apply(move, txn)
    }

    /// Throws what `update` would throw, changing nothing; returns what `update` would do, for
    /// `apply` in the same transaction before anything else changes the view (nil: nothing).
    func check(from old: StoredObject?, to new: StoredObject?, objects: ObjectTable, _ txn: StoreTransaction) throws
        -> Move?
    {
        try plannedMove(from: old, to: new, objects: objects, txn)
    }

    /// Does a move `check` returned: the keys and the unique rule are not worked out twice.
    func apply(_ move: Move, _ txn: StoreTransaction) throws {
        if let old = move.old { try tree.remove(old, txn) }
        if let new = move.new { try tree.insert(new, txn) }
    }

    /// The keys to remove and insert; nil when the entry stays where it is.
    private func plannedMove(
        from old: StoredObject?, to new: StoredObject?, objects: ObjectTable, _ txn: StoreTransaction
    ) throws
        -> Move?
    {
        let oldKey = try key(for: old)
        let newKey = try key(for: new)
        if oldKey == newKey { return nil }
        if let newKey, let new, unique, constrainsUniqueness(new) {
            if let existing = try tree.firstKey(withPrefix: uniqueTuple(of: newKey, id: new.id), txn) {
                let existingID = existing.withUnsafeBytes { SortKey.id(in: $0) }
                if existingID != new.id {
                    // The key as the holder stores it: 1 and 1.0 share a key, and the holder's spelling is the one in the view.
                    let holder = try objects.get(collection, existingID, txn.lmdb) ?? new
                    throw StoreError.conflict(uniqueConflict(sortValues(of: holder), existingID: existingID))
                }
            }
        }
        return Move(old: oldKey, new: newKey)
    }

    /// Uniqueness binds objects that have every sort field; one that lacks any is exempt, as a row
    /// with a NULL is from an SQL unique index.
    func constrainsUniqueness(_ object: StoredObject) -> Bool {
        sort.fields.allSatisfy { object.value(at: $0.path) != nil }
    }

    /// The values of the sort fields of `object`, as JSON, for conflict details.
    func sortValues(of object: StoredObject) -> JSON {
        .array(
            sort.fields.map { field in
                switch field.path {
                case .id: return .string(object.id)
                case .version: return .int(Int64(object.version))
                case .createdAt: return ["$date": .string(object.createdAt.rfc3339)]
                case .updatedAt: return ["$date": .string(object.updatedAt.rfc3339)]
                case .data(let segments): return object.data.value(atPath: segments) ?? .null
                }
            })
    }

    /// The part of a key that a unique view keeps unique: the encoded sort values, without the id
    /// that ends every key (the id and 2 bytes of framing).
    func uniqueTuple(of key: [UInt8], id: String) -> [UInt8] {
        Array(key.prefix(key.count - id.utf8.count - 2))
    }

    private func uniqueConflict(_ values: JSON, existingID: String) -> Conflict {
        Conflict(
            .unique(view: name, key: values, existingID: existingID),
            "unique view \(Names.quoted(name)) already holds \(collection)/\(existingID) with \(sort) = \(values)")
    }
}
