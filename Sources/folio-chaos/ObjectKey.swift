/// An object's identity: collection and id.
struct ObjectKey: Hashable, CustomStringConvertible {
    let collection: String
    let id: String

    var description: String { "\(collection)/\(id)" }
}
