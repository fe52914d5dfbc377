import FolioJSON

/// A view's definition as the log and `view.list` give it: `sort` defaults to `["createdAt"]`,
/// `unique` to false, `where` is kept as written.
struct ViewDefinition: Equatable, CustomStringConvertible {
    let name: String
    let collection: String
    let filter: JSON?
    let sort: [String]
    let unique: Bool

    init(name: String, collection: String, filter: JSON?, sort: [String], unique: Bool) {
        self.name = name
        self.collection = collection
        self.filter = filter
        self.sort = sort.isEmpty ? ["createdAt"] : sort
        self.unique = unique
    }

    /// From a `view.defined` event's `view`, a `view.define` result or a `view.list` entry (its
    /// `count` is not part of the definition).
    init?(_ object: JSONObject) {
        guard let name = object["name"]?.stringValue, let collection = object["collection"]?.stringValue,
            case .array(let sort)? = object["sort"], case .bool(let unique)? = object["unique"]
        else { return nil }
        self.init(
            name: name, collection: collection, filter: object["where"], sort: sort.compactMap(\.stringValue),
            unique: unique)
    }

    /// The fields of a `view.define` request.
    var requestFields: [JSONObject.Field] {
        var fields = [
            JSONObject.Field(key: "name", value: .string(name)), .init(key: "collection", value: .string(collection)),
        ]
        if let filter { fields.append(.init(key: "where", value: filter)) }
        fields.append(.init(key: "sort", value: .array(sort.map { .string($0) })))
        if unique { fields.append(.init(key: "unique", value: true)) }
        return fields
    }

    /// The sort fields without their direction.
    var sortFields: [String] { sort.map { $0.hasPrefix("-") || $0.hasPrefix("+") ? String($0.dropFirst()) : $0 } }

    var description: String {
        "\(name) on \(collection)" + (filter.map { " where \($0)" } ?? "") + " sort \(sort)" + (unique ? " unique" : "")
    }
}

/// A view absent or defined.
enum ViewState: Equatable, CustomStringConvertible {
    case absent
    case defined(ViewDefinition)

    var description: String {
        switch self {
        case .absent: return "absent"
        case .defined(let definition): return "defined as \(definition)"
        }
    }
}
