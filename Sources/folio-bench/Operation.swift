/// One request of the load: read a pre-populated key, durably create a fresh one, durably update a
/// pre-populated one, or (Folio only) create `batchSize` in one atomic batch.
struct Operation {
    /// The creates in one `createBatch`.
    static let batchSize = 100

    enum Kind: Int, CaseIterable {
        case get
        /// Folio `create` without an id: foliod assigns one, as an app creating a record would let it.
        /// Redis has no ids of its own: its `SET` names the fresh key either way.
        case create
        /// Folio `create` with the fresh key as a client-chosen id.
        case createNamed
        /// Folio `update` of a pre-populated key (a merge patch of one field): the number of objects
        /// stays the same however long the load runs. Redis: `SET` of the key.
        case update
        /// Folio `batch` of `batchSize` creates without ids, atomic: all are stored or none.
        case createBatch

        /// The events one such request writes.
        var events: Int { self == .createBatch ? Operation.batchSize : (self == .get ? 0 : 1) }
    }

    let kind: Kind
    let key: Key
}
