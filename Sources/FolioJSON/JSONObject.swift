/// A JSON object that keeps its fields in the order they were given, so that serializing it is
/// deterministic. Small objects are searched linearly; from `indexThreshold` fields on, an object
/// also keeps each key's position, so lookups, equality and merging stay linear in its size however
/// many keys a client sends.
public struct JSONObject: Sendable, Equatable, Sequence {
    public struct Field: Sendable, Equatable {
        public var key: String
        public var value: JSON

        public init(key: String, value: JSON) {
            self.key = key
            self.value = value
        }
    }

    /// Objects with more fields than this keep `positions`.
    public static let indexThreshold = 12

    public private(set) var fields: [Field]
    /// Each key's index in `fields`, for objects above `indexThreshold` fields.
    private var positions: [String: Int]?

    public init() { fields = [] }

    /// Fields with distinct keys, in order.
    public init(_ fields: [Field]) {
        self.fields = fields
        positions = Self.positions(of: fields)
    }

    /// Fields with distinct keys and their positions, as the parser found them.
    init(fields: [Field], positions: [String: Int]?) {
        self.fields = fields
        self.positions = fields.count > Self.indexThreshold ? (positions ?? Self.positions(of: fields)) : nil
    }

    private static func positions(of fields: [Field]) -> [String: Int]? {
        guard fields.count > indexThreshold else { return nil }
        var positions: [String: Int] = [:]
        positions.reserveCapacity(fields.count)
        for (index, field) in fields.enumerated() { positions[field.key] = index }
        return positions
    }

    public var count: Int { fields.count }
    public var isEmpty: Bool { fields.isEmpty }
    public var keys: [String] { fields.map(\.key) }

    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

    /// The index in `fields` of `key`'s field.
    public func index(of key: String) -> Int? {
        if let positions { return positions[key] }
        return fields.firstIndex { $0.key == key }
    }

    /// The value for `key`; setting nil removes the field (O(count)), setting a new key appends it.
    public subscript(key: String) -> JSON? {
        get { index(of: key).map { fields[$0].value } }
        set {
            if let index = index(of: key) {
                if let newValue {
                    fields[index].value = newValue
                } else {
                    fields.remove(at: index)
                    positions = Self.positions(of: fields)
                }
            } else if let newValue {
                fields.append(Field(key: key, value: newValue))
                if positions != nil {
                    positions?[key] = fields.count - 1
                } else {
                    positions = Self.positions(of: fields)
                }
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
