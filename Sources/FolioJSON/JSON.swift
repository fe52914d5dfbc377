/// A JSON value. Numbers keep their kind: an integer literal that fits in 64 bits is `.int`,
/// any other number `.double`; equality is structural (`.int(1) != .double(1)`), ordering by meaning
/// lives with the query rules, not here.
public enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object(JSONObject)

    public var objectValue: JSONObject? {
        if case .object(let object) = self { return object }
        return nil
    }

    public var stringValue: String? {
        if case .string(let string) = self { return string }
        return nil
    }

    /// The value as an integer, if it is an integer, or a double with an integral value in range.
    public var integerValue: Int64? {
        switch self {
        case .int(let value): return value
        case .double(let value) where value.rounded() == value && abs(value) < 9.2e18: return Int64(value)
        default: return nil
        }
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The name of the value's kind, for error messages: "a string", "an object", ...
    public var kindDescription: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .int, .double: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

extension JSON: ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSON)...) {
        self = .object(JSONObject(elements.map { JSONObject.Field(key: $0.0, value: $0.1) }))
    }
}

extension JSON {
    /// The same value with every object's fields sorted by key (UTF-8 order): equal values that
    /// differ only in field order have the same canonical form.
    public var canonical: JSON {
        switch self {
        case .array(let elements): return .array(elements.map(\.canonical))
        case .object(let object):
            return .object(
                JSONObject(
                    object.fields.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
                        .map { JSONObject.Field(key: $0.key, value: $0.value.canonical) }))
        default: return self
        }
    }
}

extension JSON {
    /// Writes `canonical.serialized()`'s bytes without building the canonical value: objects of
    /// one field (most of a `where`) need no sorting, and none allocates a tree.
    public func writeCanonical(to writer: inout JSONWriter) {
        switch self {
        case .array(let elements):
            writer.bytes.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { writer.bytes.append(UInt8(ascii: ",")) }
                element.writeCanonical(to: &writer)
            }
            writer.bytes.append(UInt8(ascii: "]"))
        case .object(let object):
            writer.bytes.append(UInt8(ascii: "{"))
            let fields = object.fields
            func write(_ field: JSONObject.Field, first: Bool) {
                if !first { writer.bytes.append(UInt8(ascii: ",")) }
                writer.write(field.key)
                writer.bytes.append(UInt8(ascii: ":"))
                field.value.writeCanonical(to: &writer)
            }
            if fields.count <= 1 {
                for field in fields { write(field, first: true) }
            } else {
                let order = fields.indices.sorted { fields[$0].key.utf8.lexicographicallyPrecedes(fields[$1].key.utf8) }
                for (position, index) in order.enumerated() { write(fields[index], first: position == 0) }
            }
            writer.bytes.append(UInt8(ascii: "}"))
        default:
            writer.write(self)
        }
    }
}

extension JSON: CustomStringConvertible {
    public var description: String { String(decoding: serialized(), as: UTF8.self) }
}
