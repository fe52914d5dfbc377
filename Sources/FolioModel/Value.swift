import FolioJSON

/// A value as queries see it: typed values resolved (`$date` to an instant, `$ref` to its target),
/// numbers compared numerically. One total order spans all kinds:
/// missing < null < false < true < numbers < strings < dates < refs < arrays < objects.
/// Strings compare by Unicode code points, arrays element by element, objects by their fields in
/// key order.
public indirect enum Value: Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case date(Instant)
    /// `collection/id`
    case reference(String)
    case array([Value])
    /// Fields sorted by key.
    case object([(key: String, value: Value)])

    public init(_ json: JSON) {
        switch json {
        case .null: self = .null
        case .bool(let flag): self = .bool(flag)
        case .int(let number): self = .int(number)
        case .double(let number): self = number == 0 ? .int(0) : .double(number)
        case .string(let string): self = .string(string)
        case .array(let elements): self = .array(elements.map(Value.init))
        case .object(let object):
            switch TypedValue.recognize(object) {
            case .date(let instant)?: self = .date(instant)
            case .reference(let collection, let id)?: self = .reference(collection + "/" + id)
            // A file is the name it holds: as an object of one field it already compares by that
            // name, and its sort keys stay what they were before `$file` existed.
            case .file?, nil:
                self = .object(
                    object.fields.map { (key: $0.key, value: Value($0.value)) }.sorted {
                        $0.key.utf8.lexicographicallyPrecedes($1.key.utf8)
                    })
            }
        }
    }

    /// The kind's place in the total order; range operators match only values of the same kind.
    public var kind: Kind {
        switch self {
        case .null: return .null
        case .bool: return .bool
        case .int, .double: return .number
        case .string: return .string
        case .date: return .date
        case .reference: return .reference
        case .array: return .array
        case .object: return .object
        }
    }

    public enum Kind: UInt8, Sendable, Comparable {
        case missing = 1, null, bool, number = 5, string, date, reference, array, object

        public static func < (lhs: Kind, rhs: Kind) -> Bool { lhs.rawValue < rhs.rawValue }
    }
}

extension Value: Comparable {
    public static func == (lhs: Value, rhs: Value) -> Bool { compare(lhs, rhs) == 0 }
    public static func < (lhs: Value, rhs: Value) -> Bool { compare(lhs, rhs) < 0 }

    /// -1, 0 or 1 by the total order.
    public static func compare(_ lhs: Value, _ rhs: Value) -> Int {
        switch (lhs, rhs) {
        case (.null, .null): return 0
        case (.bool(let a), .bool(let b)): return a == b ? 0 : (a ? 1 : -1)
        case (.int(let a), .int(let b)): return a == b ? 0 : (a < b ? -1 : 1)
        case (.double(let a), .double(let b)): return a == b ? 0 : (a < b ? -1 : 1)
        case (.int(let a), .double(let b)): return compareExactly(a, b)
        case (.double(let a), .int(let b)): return -compareExactly(b, a)
        case (.string(let a), .string(let b)), (.reference(let a), .reference(let b)): return compareUTF8(a, b)
        case (.date(let a), .date(let b)): return a == b ? 0 : (a < b ? -1 : 1)
        case (.array(let a), .array(let b)):
            for (x, y) in zip(a, b) {
                let order = compare(x, y)
                if order != 0 { return order }
            }
            return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
        case (.object(let a), .object(let b)):
            for (x, y) in zip(a, b) {
                let keyOrder = compareUTF8(x.key, y.key)
                if keyOrder != 0 { return keyOrder }
                let order = compare(x.value, y.value)
                if order != 0 { return order }
            }
            return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
        default:
            return lhs.kind < rhs.kind ? -1 : 1
        }
    }

    /// Orders a missing value first.
    public static func compare(_ lhs: Value?, _ rhs: Value?) -> Int {
        switch (lhs, rhs) {
        case (nil, nil): return 0
        case (nil, _): return -1
        case (_, nil): return 1
        case (let a?, let b?): return compare(a, b)
        }
    }

    /// Strings by their UTF-8 bytes, as their sort keys order them: never Swift's `==`, which
    /// holds canonically equivalent strings equal ("\u{2000}" and "\u{2002}", "é" composed and
    /// decomposed) whose bytes, and so whose keys in a view, differ. A filter read against an
    /// object then agrees with the same filter read from a view's keys.
    static func compareUTF8(_ a: String, _ b: String) -> Int {
        var left = a.utf8.makeIterator()
        var right = b.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case (let x?, let y?): if x != y { return x < y ? -1 : 1 }
            }
        }
    }

    /// Compares an integer with a double without rounding either.
    static func compareExactly(_ a: Int64, _ b: Double) -> Int {
        if b >= 9_223_372_036_854_775_808.0 { return -1 }
        if b < -9_223_372_036_854_775_808.0 { return 1 }
        let whole = b.rounded(.towardZero)
        let integral = Int64(whole)
        if a != integral { return a < integral ? -1 : 1 }
        let fraction = b - whole
        return fraction == 0 ? 0 : (fraction > 0 ? -1 : 1)
    }
}

extension Value: CustomStringConvertible {
    public var description: String {
        switch self {
        case .null: return "null"
        case .bool(let flag): return String(flag)
        case .int(let number): return String(number)
        case .double(let number): return number.description
        case .string(let string): return JSON.string(string).description
        case .date(let instant): return "{\"$date\":\"\(instant.rfc3339Milliseconds)\"}"
        case .reference(let target): return "{\"$ref\":\(JSON.string(target).description)}"
        case .array(let elements): return "[" + elements.map(\.description).joined(separator: ",") + "]"
        case .object(let fields):
            return "{"
                + fields.map { JSON.string($0.key).description + ":" + $0.value.description }.joined(separator: ",")
                + "}"
        }
    }
}
