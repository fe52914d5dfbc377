import FolioJSON
import FolioModel
import LMDB

/// Applies one event to current state, history and every tree: a pure function of the event and the
/// store, used alike by live writes, rebuild, import and verify. Throws `corrupted` when the event
/// does not fit the store (a damaged or foreign log), and `conflict` when it would break a unique view.
///
/// A class: the store holds one, and every write reaches it several times an event; as a struct of
/// six structs, each reach copied it, a retain and a release for every reference it holds.
final class EventApplier: Sendable {
    let objects: ObjectTable
    let history: HistoryIndex
    let catalog: Catalog
    let references: RefIndex
    let requests: RequestIndex
    let files: FileIndex

    init(_ databases: StoreDatabases, definitions: DefinitionCache, requestRetention: Int64) {
        objects = ObjectTable(database: databases.objects)
        history = HistoryIndex(database: databases.objects)
        catalog = Catalog(database: databases.catalog, meta: databases.meta, definitions: definitions)
        references = RefIndex(catalog: catalog)
        requests = RequestIndex(database: databases.requests, retention: requestRetention)
        files = FileIndex(database: databases.files)
    }

    /// The object before an event: unknown (read and check it), or known because the caller already
    /// read and checked it (a live write), with the object after it when the caller computed that too.
    /// A struct, not an enum with a payload: taking an object out of the payload copied the whole
    /// payload through the runtime's generic tuple copy first (about 250 instructions a copy, a
    /// dozen copies a create).
    struct Before {
        /// Whether the caller read and checked the object (`object` is then what it found).
        let isKnown: Bool
        /// The object before the event, when known.
        let object: StoredObject?
        /// The object after the event, when the caller computed it.
        let after: StoredObject?
        /// What `checkTrees` planned for the object's views.
        let plannedViews: PlannedViews?

        static var unknown: Before { Before(isKnown: false, object: nil, after: nil, plannedViews: nil) }

        /// The object before and after the event, and what `checkTrees` planned for its views.
        static func known(_ object: StoredObject?, after: StoredObject? = nil, views: PlannedViews? = nil) -> Before {
            Before(isKnown: true, object: object, after: after, plannedViews: views)
        }
    }

    /// The moves `checkTrees` found for an object's views, one per view of its collection in the
    /// catalog's order (nil where the entry stays), to be done as planned when the event is applied.
    struct PlannedViews {
        /// The views the moves are for (the catalog's at the check: nothing changes it before the
        /// event is applied), so that applying them does not look the views up again.
        fileprivate let views: [Catalog.View]
        fileprivate let moves: [ViewIndex.Move?]
    }

    /// What an object event did: the object before it (nil for a create), the object after it and
    /// its record as stored (nil for a delete).
    struct ObjectChange {
        let before: StoredObject?
        let object: StoredObject?
        let record: [UInt8]?
    }

    /// What the event did to its object; nil for the events of views, schemas and files.
    /// `createdData`: a created object's data as canonical JSON, when the caller has it, so it is not
    /// serialized again.
    @discardableResult
    func apply(
        _ event: Event, _ txn: StoreTransaction, before: Before = .unknown, createdData: ArraySlice<UInt8>? = nil
    ) throws -> ObjectChange? {
        let result = try applyChange(event, txn, before: before, createdData: createdData)
        try requests.apply(event, txn.lmdb)
        // The event's view ops as one record: an event's, not a commit's, so that the stream's
        // records are the same however the events are grouped into commits (a replay's).
        try ViewBuffer.flushOps(txn)
        return result
    }

    private func applyChange(_ event: Event, _ txn: StoreTransaction, before: Before, createdData: ArraySlice<UInt8>?)
        throws -> ObjectChange?
    {
        switch event.change {
        case .created(let collection, let id, _):
            if !before.isKnown {
                let state = try history.createState(collection, id, txn.lmdb)
                guard !state.exists else {
                    throw StoreError.corrupted("event \(event.sequence) creates \(collection)/\(id), which exists")
                }
                try expectVersion(event, after: state.lastVersion)
            }
            guard let object = try applied(event, to: nil, before) else {
                throw StoreError.corrupted("event \(event.sequence) creates nothing")
            }
            let record = try store(object, replacing: nil, event, txn, data: createdData, planned: before.plannedViews)
            return ObjectChange(before: nil, object: object, record: record)
        case .updated(let collection, let id, _, _):
            let old = try existing(collection, id, event, before, txn)
            guard let object = try applied(event, to: old, before) else {
                throw StoreError.corrupted("event \(event.sequence) updates nothing")
            }
            let record = try store(object, replacing: old, event, txn, planned: before.plannedViews)
            return ObjectChange(before: old, object: object, record: record)
        case .deleted(let collection, let id):
            let old = try existing(collection, id, event, before, txn)
            try objects.delete(collection, id, txn.lmdb)
            try history.record(collection, id, sequence: event.sequence, version: event.version, txn.lmdb)
            try updateTrees(from: old, to: nil, planned: before.plannedViews, txn)
            try files.noteReferences(try references.update(from: old, to: nil, txn), txn.lmdb)
            return ObjectChange(before: old, object: nil, record: nil)
        case .schemaDefined(let schema):
            try catalog.putSchema(schema, txn)
            return nil
        case .schemaDropped(let collection):
            guard try catalog.schema(collection, txn) != nil else {
                throw StoreError.corrupted("event \(event.sequence) drops the schema of \(collection), which has none")
            }
            try catalog.removeSchema(collection, txn)
            return nil
        case .viewDefined(let definition):
            guard try catalog.view(definition.name, txn) == nil else {
                throw StoreError.corrupted("event \(event.sequence) defines view \(definition.name), which exists")
            }
            try fill(ViewIndex(definition: definition, tree: try catalog.addView(definition, txn)), txn)
            return nil
        case .viewDropped(let name):
            guard let view = try catalog.view(name, txn) else {
                throw StoreError.corrupted("event \(event.sequence) drops view \(name), which does not exist")
            }
            try catalog.removeView(view, txn)
            return nil
        case .filePut(let binding):
            try files.apply(
                event, referenced: try references.isReferenced(FileName.collection, binding.name, txn), txn.lmdb)
            return nil
        case .fileDeleted(let name):
            try files.apply(event, referenced: try references.isReferenced(FileName.collection, name, txn), txn.lmdb)
            return nil
        }
    }

    /// The object after the event: as the caller computed it, or folded now.
    private func applied(_ event: Event, to old: StoredObject?, _ before: Before) throws -> StoredObject? {
        if before.isKnown, let after = before.after { return after }
        do {
            return try event.applied(to: old)
        } catch {
            throw StoreError.corrupted(
                "event \(event.sequence) does not apply to \(old.map { "\($0.collection)/\($0.id)" } ?? "nothing"): \(error.message)"
            )
        }
    }

    private func existing(_ collection: String, _ id: String, _ event: Event, _ before: Before, _ txn: StoreTransaction)
        throws
        -> StoredObject
    {
        if before.isKnown, let old = before.object { return old }
        guard let old = try objects.get(collection, id, txn.lmdb) else {
            throw StoreError.corrupted("event \(event.sequence) changes \(collection)/\(id), which does not exist")
        }
        try expectVersion(event, after: old.version)
        return old
    }

    private func expectVersion(_ event: Event, after version: UInt64) throws {
        guard event.version == version + 1 else {
            throw StoreError.corrupted("event \(event.sequence) sets version \(event.version) after version \(version)")
        }
    }

    /// Returns the object's record.
    private func store(
        _ object: StoredObject, replacing old: StoredObject?, _ event: Event, _ txn: StoreTransaction,
        data: ArraySlice<UInt8>? = nil, planned: PlannedViews? = nil
    ) throws -> [UInt8] {
        try updateTrees(from: old, to: object, planned: planned, txn)
        try files.noteReferences(try references.update(from: old, to: object, txn), txn.lmdb)
        let record = ObjectTable.encode(object, serializedData: data)
        try objects.put(record: record, object.collection, object.id, txn.lmdb)
        try history.record(
            object.collection, object.id, sequence: event.sequence, version: object.version,
            checkpoint: HistoryIndex.isCheckpoint(version: object.version, event.change) ? record : nil, txn.lmdb)
        return record
    }

    /// Throws what moving the object from `old` to `new` would throw in its views (a unique conflict,
    /// a key too long), changing nothing; returns the moves, for `Before.known`, so that the keys
    /// (and a unique view's lookup) are not worked out a second time when the event is applied.
    func checkTrees(from old: StoredObject?, to new: StoredObject?, _ txn: StoreTransaction) throws -> PlannedViews {
        guard let collection = new?.collection ?? old?.collection else { return PlannedViews(views: [], moves: []) }
        let views = try catalog.views(on: collection, txn)
        return PlannedViews(
            views: views, moves: try views.map { try $0.index.check(from: old, to: new, objects: objects, txn) })
    }

    /// The collection's creation-order index and every view of the collection.
    private func updateTrees(
        from old: StoredObject?, to new: StoredObject?, planned: PlannedViews? = nil, _ txn: StoreTransaction
    ) throws {
        guard let collection = new?.collection ?? old?.collection else { return }
        if let planned {
            for (view, move) in zip(planned.views, planned.moves) {
                if let move { try view.index.apply(move, txn) }
            }
        } else {
            for view in try catalog.views(on: collection, txn) {
                try view.index.update(from: old, to: new, objects: objects, txn)
            }
        }
        if old == nil || new == nil {
            let tree = try catalog.collectionTree(collection, txn) ?? catalog.createCollectionTree(collection, txn)
            try ViewIndex(creationOrderOf: collection, tree: tree).update(from: old, to: new, objects: objects, txn)
        }
    }

    /// Fills a new view from the objects of its collection. A unique view over duplicates fails
    /// with a conflict that lists them, one group per shared key (however its values are spelled:
    /// `1` and `1.0` are one key), each shown with the values of the group's first object.
    private func fill(_ view: ViewIndex, _ txn: StoreTransaction) throws {
        var duplicates: [[UInt8]: [String]] = [:]
        var order: [[UInt8]] = []
        try objects.forEach(in: view.collection, txn.lmdb) { object in
            guard let key = try view.key(for: object) else { return true }
            if view.unique && view.constrainsUniqueness(object) {
                let tuple = view.uniqueTuple(of: key, id: object.id)
                if let existing = try view.tree.firstKey(withPrefix: tuple, txn) {
                    if duplicates[tuple] == nil {
                        order.append(tuple)
                        duplicates[tuple] = [existing.withUnsafeBytes { SortKey.id(in: $0) }]
                    }
                    duplicates[tuple]?.append(object.id)
                    return true
                }
            }
            try view.tree.insert(key, direct: true, txn)
            return true
        }
        // The keys held back for appending go in now, and the tree's last key is forgotten: its
        // next change is an op.
        try view.tree.applyHeldAppends(txn)
        if !order.isEmpty {
            let groups = order.map { duplicates[$0]! }
            let shown = try groups.prefix(10).map { group in
                let first = try objects.get(view.collection, group[0], txn.lmdb)
                return "\(first.map { view.sortValues(of: $0).description } ?? "?"): \(group.joined(separator: ", "))"
            }.joined(separator: "; ")
            throw StoreError.conflict(
                Conflict(
                    .duplicates(view: view.name, groups: groups),
                    "cannot define unique view \(Names.quoted(view.name)): \(order.count) sort key(s) are shared by several objects: \(shown)"
                ))
        }
    }
}
