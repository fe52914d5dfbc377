/// A JSON object that keeps its fields in the order they were given, so that serializing it is
/// deterministic. Lookups are linear: objects of records are small.
public struct JSONObject: Sendable, Equatable, Sequence {
    public struct Field: Sendable, Equatable {
        public var key: String
        public var value: JSON

        public init(key: String, value: JSON) {
            self.key = key
            self.value = value
        }
    }

    public private(set) var fields: [Field]

    public init() { fields = [] }

    /// Fields with distinct keys, in order.
    public init(_ fields: [Field]) { self.fields = fields }

    public var count: Int { fields.count }
    public var isEmpty: Bool { fields.isEmpty }
    public var keys: [String] { fields.map(\.key) }

    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

    /// The value for `key`; setting nil removes the field, setting a new key appends it.
    public subscript(key: String) -> JSON? {
        get {
            for field in fields where field.key == key { return field.value }
            return nil
        }
        set {
            if let index = fields.firstIndex(where: { $0.key == key }) {
                if let newValue { fields[index].value = newValue } else { fields.remove(at: index) }
            } else if let newValue {
                fields.append(Field(key: key, value: newValue))
            }
        }
    }

    /// Objects are equal when they have the same keys with equal values, in any order.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.count == rhs.count else { return false }
        for field in lhs.fields {
            guard let other = rhs[field.key], other == field.value else { return false }
        }
        return true
    }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (String, JSON)...) {
        self.init(elements.map { Field(key: $0.0, value: $0.1) })
    }
}
