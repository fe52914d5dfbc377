import FolioJSON

/// An object that refers to a target (an object, or a file by `{"$file"}`), and the field path it
/// refers from.
public struct Referrer: Sendable, Equatable {
    public let collection: String
    public let id: String
    public let path: String

    /// `{"ref": "<collection>/<id>", "field": "<path>"}`, as `file.get` lists it and a `conflict` names it.
    public var json: JSON { ["ref": .string(collection + "/" + id), "field": .string(path)] }
}
