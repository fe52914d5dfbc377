/// A reference to a record of `Target`, stored as `{"$ref": "Collection/id"}` (PROTOCOL.md §4).
///
/// When a query or `get` includes the field (`include`), the server puts the whole target in its
/// place; it is then in `object`.
public struct Ref<Target: FolioRecord>: Codable {
    /// The target's id.
    public let id: String
    /// The target itself, when the answer included it; nil otherwise (and when it does not exist).
    public private(set) var object: Target?

    public init(_ id: String) {
        self.id = id
    }

    /// A reference to a saved record; throws `missingID` if it has no id yet.
    public init(to record: Target) throws {
        guard let id = record.id else { throw FolioError.missingID }
        self.id = id
        object = record
    }

    /// Reads the target.
    public func fetch(on folio: Folio, isolation: isolated (any Actor)? = #isolation) async throws -> Target {
        try await Target.get(id, on: folio)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: FieldKey.self)
        try container.encode(Target.collection + "/" + id, forKey: FieldKey("$ref"))
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: FieldKey.self)
        if let text = try container.decodeIfPresent(String.self, forKey: FieldKey("$ref")) {
            guard let slash = text.firstIndex(of: "/"), text[..<slash] == Target.collection else {
                throw FolioError.decoding("\(text) is not a reference to a \(Target.collection)")
            }
            id = String(text[text.index(after: slash)...])
        } else {
            let target = try Target(from: decoder)
            guard let id = target.id else {
                throw FolioError.decoding("an included \(Target.collection) without an id")
            }
            self.id = id
            object = target
        }
    }
}

extension Ref: Hashable {
    public static func == (lhs: Ref, rhs: Ref) -> Bool { lhs.id == rhs.id }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }
}

extension Ref: Sendable where Target: Sendable {}

extension Ref: ProbeValue {
    static func probe(_ sentinel: String) -> Ref { Ref(sentinel) }
    var probeSentinel: String { id }
}
