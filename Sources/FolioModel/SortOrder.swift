import FolioJSON

/// The order of a list or view: fields, each ascending or descending, ties broken by id.
public struct SortOrder: Hashable, Sendable, CustomStringConvertible {
    public struct Field: Hashable, Sendable {
        public var path: FieldPath
        public var descending: Bool

        public init(_ path: FieldPath, descending: Bool = false) {
            self.path = path
            self.descending = descending
        }

        /// The field as a `sort` entry that parses back to it: an ascending field whose name starts
        /// with `-` or `+` needs the `+`, or it would read as another field, or descending.
        var entry: String {
            let path = path.description
            if descending { return "-" + path }
            return path.hasPrefix("-") || path.hasPrefix("+") ? "+" + path : path
        }
    }

    public static let maxFields = 8
    /// Creation order: `createdAt` ascending.
    public static let creation = SortOrder([Field(.createdAt)])

    public var fields: [Field]

    public init(_ fields: [Field]) { self.fields = fields }

    /// Parses `["-stuId", "name"]`; `-` means descending. An empty list is creation order.
    public init(parsing json: JSON) throws(ValidationError) {
        guard case .array(let elements) = json else {
            throw ValidationError("sort must be an array of field paths, e.g. [\"-stuId\", \"name\"]")
        }
        guard elements.count <= Self.maxFields else {
            throw ValidationError("sort has \(elements.count) fields; at most \(Self.maxFields)")
        }
        var fields: [Field] = []
        for element in elements {
            guard case .string(var text) = element else {
                throw ValidationError("sort entries must be strings, found \(element.kindDescription)")
            }
            var descending = false
            if text.hasPrefix("-") {
                descending = true
                text.removeFirst()
            } else if text.hasPrefix("+") {
                text.removeFirst()
            }
            do {
                fields.append(Field(try FieldPath(parsing: text), descending: descending))
            } catch {
                throw ValidationError("sort: \(error.message)")
            }
        }
        self = fields.isEmpty ? .creation : SortOrder(fields)
    }

    /// The same fields with every direction flipped: reading a view backwards gives this order.
    public var reversed: SortOrder {
        SortOrder(fields.map { Field($0.path, descending: !$0.descending) })
    }

    public var json: JSON { .array(fields.map { .string($0.entry) }) }

    public var description: String { fields.map(\.entry).joined(separator: ",") }

    /// The key an object has in this order: its sort fields, then its id.
    @inlinable
    public func key(for object: some FieldSource, id: String) -> [UInt8] {
        var bytes = tupleKey(for: object)
        SortKey.appendID(id, to: &bytes)
        return bytes
    }

    /// The sort fields alone, without the id: what a unique view keeps unique.
    @inlinable
    public func tupleKey(for object: some FieldSource) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        for field in fields {
            object.appendSortKey(at: field.path, descending: field.descending, to: &bytes)
        }
        return bytes
    }
}
