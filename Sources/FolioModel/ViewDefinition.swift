import FolioJSON

/// A named, materialized list: the objects of one collection that match `filter`, kept in `sort`
/// order; with `unique`, no two of them share the sort fields.
public struct ViewDefinition: Equatable, Sendable {
    public var name: String
    public var collection: String
    /// The `where` as the client wrote it, kept so that the definition reads back as given.
    public var whereJSON: JSON?
    public var filter: Filter?
    public var sort: SortOrder
    public var unique: Bool

    public init(name: String, collection: String, whereJSON: JSON?, sort: SortOrder, unique: Bool)
        throws(ValidationError)
    {
        try Names.validateView(name)
        try Names.validateCollection(collection)
        self.name = name
        self.collection = collection
        (self.whereJSON, self.filter) = try Filter.parse(optional: whereJSON)
        self.sort = sort
        self.unique = unique
    }

    /// `{"name", "collection", "where"?, "sort", "unique"}`
    public init(parsing json: JSON) throws(ValidationError) {
        guard case .object(let object) = json else { throw ValidationError("a view definition must be an object") }
        guard case .string(let name)? = object["name"] else { throw ValidationError("view: \"name\" must be a string") }
        guard case .string(let collection)? = object["collection"] else {
            throw ValidationError("view: \"collection\" must be a string")
        }
        let whereJSON = object["where"].flatMap { $0.isNull ? nil : $0 }
        let sort =
            try object["sort"].map { (json) throws(ValidationError) in try SortOrder(parsing: json) } ?? .creation
        var unique = false
        if let flag = object["unique"] {
            guard case .bool(let value) = flag else { throw ValidationError("view: \"unique\" must be true or false") }
            unique = value
        }
        try self.init(name: name, collection: collection, whereJSON: whereJSON, sort: sort, unique: unique)
    }

    public var json: JSON {
        var object = JSONObject()
        object["name"] = .string(name)
        object["collection"] = .string(collection)
        if let whereJSON { object["where"] = whereJSON }
        object["sort"] = sort.json
        object["unique"] = .bool(unique)
        return .object(object)
    }

    /// Whether `object` belongs in the view (it is of the view's collection).
    public func includes(_ object: StoredObject) -> Bool {
        filter?.matches(object) ?? true
    }
}
