/// One request of the load: read a pre-populated key, or durably create a fresh one.
struct Operation {
    enum Kind: Int, CaseIterable {
        case get
        case create
    }

    let kind: Kind
    let key: Key
}
