/// One request of the load: read a pre-populated key, or durably create a fresh one.
struct Operation {
    enum Kind: Int, CaseIterable {
        case get
        /// Folio `create` without an id: foliod assigns one, as an app creating a record would let it.
        /// Redis has no ids of its own: its `SET` names the fresh key either way.
        case create
        /// Folio `create` with the fresh key as a client-chosen id.
        case createNamed
    }

    let kind: Kind
    let key: Key
}
