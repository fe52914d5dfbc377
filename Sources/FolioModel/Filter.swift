import FolioJSON

/// A parsed `where`: conditions on fields, combined with and / or.
public indirect enum Filter: Equatable, Sendable {
    case all([Filter])
    case any([Filter])
    case condition(FieldPath, Condition)

    public enum Condition: Equatable, Sendable {
        case equal(Value)
        case notEqual(Value)
        case greater(Value)
        case greaterOrEqual(Value)
        case less(Value)
        case lessOrEqual(Value)
        /// Operands sorted by `Value`'s order, so that a match is a binary search, not a pass over
        /// every operand for every object.
        case oneOf([Value])
        case noneOf([Value])
        case exists(Bool)
        case prefix(String)
        /// The field is an array holding an element equal to the value.
        case contains(Value)
    }

    public static let maxNodes = 256

    /// Parses an optional `where`; an empty one matches everything and counts as no filter at all
    /// (so indexes still answer). Returns the `where` to keep (nil when empty) and its filter.
    public static func parse(optional json: JSON?) throws(ValidationError) -> (whereJSON: JSON?, filter: Filter?) {
        guard let json else { return (nil, nil) }
        let filter = try Filter(parsing: json)
        // (Not a ternary: JSON's nil literal would make the empty case JSON.null.)
        if filter == .all([]) { return (nil, nil) }
        return (json, filter)
    }

    /// Parses a where-object: `{"done": false, "n": {"$gt": 5}, "$or": [{...}, {...}]}`.
    public init(parsing json: JSON) throws(ValidationError) {
        var budget = Filter.maxNodes
        self = try Filter.parseObject(json, at: "where", budget: &budget)
    }

    private static func parseObject(_ json: JSON, at location: String, budget: inout Int) throws(ValidationError)
        -> Filter
    {
        guard case .object(let object) = json else {
            throw ValidationError("\(location) must be an object, found \(json.kindDescription)")
        }
        var parts: [Filter] = []
        // Sorted, so that where-objects differing only in key order parse to equal filters.
        for field in object.fields.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
            budget -= 1
            if budget < 0 { throw ValidationError("where is too large: at most \(maxNodes) conditions") }
            switch field.key {
            case "$and", "$or":
                guard case .array(let elements) = field.value, !elements.isEmpty else {
                    throw ValidationError("\(location).\(field.key) must be a non-empty array of where-objects")
                }
                var children: [Filter] = []
                for (index, element) in elements.enumerated() {
                    children.append(try parseObject(element, at: "\(location).\(field.key)[\(index)]", budget: &budget))
                }
                parts.append(field.key == "$and" ? .all(children) : .any(children))
            default:
                if field.key.hasPrefix("$") {
                    throw ValidationError(
                        "\(location): unknown operator \(Names.quoted(field.key)) (expected a field, $and or $or)")
                }
                let path: FieldPath
                do { path = try FieldPath(parsing: field.key) } catch {
                    throw ValidationError("\(location): \(error.message)")
                }
                parts.append(contentsOf: try parseConditions(field.value, path: path, at: "\(location).\(field.key)"))
            }
        }
        return parts.count == 1 ? parts[0] : .all(parts)
    }

    private static func parseConditions(_ json: JSON, path: FieldPath, at location: String) throws(ValidationError)
        -> [Filter]
    {
        guard case .object(let object) = json, object.keys.contains(where: { $0.hasPrefix("$") }) else {
            return [.condition(path, .equal(try operand(json, at: location)))]
        }
        if object.count == 1, object.keys[0] == "$date" || object.keys[0] == "$ref" {
            return [.condition(path, .equal(try operand(json, at: location)))]
        }
        var conditions: [Filter] = []
        // Sorted, like the fields of a where-object, so operator order does not make another query.
        for field in object.fields.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
            let at = "\(location).\(field.key)"
            let condition: Condition
            switch field.key {
            case "$eq": condition = .equal(try operand(field.value, at: at))
            case "$ne": condition = .notEqual(try operand(field.value, at: at))
            case "$gt": condition = .greater(try operand(field.value, at: at))
            case "$gte": condition = .greaterOrEqual(try operand(field.value, at: at))
            case "$lt": condition = .less(try operand(field.value, at: at))
            case "$lte": condition = .lessOrEqual(try operand(field.value, at: at))
            case "$in", "$nin":
                guard case .array(let elements) = field.value else {
                    throw ValidationError("\(at) takes an array, found \(field.value.kindDescription)")
                }
                var values: [Value] = []
                for (index, element) in elements.enumerated() {
                    values.append(try operand(element, at: "\(at)[\(index)]"))
                }
                values.sort { Value.compare($0, $1) < 0 }
                condition = field.key == "$in" ? .oneOf(values) : .noneOf(values)
            case "$exists":
                guard case .bool(let flag) = field.value else {
                    throw ValidationError("\(at) takes true or false, found \(field.value.kindDescription)")
                }
                condition = .exists(flag)
            case "$prefix":
                guard case .string(let prefix) = field.value else {
                    throw ValidationError("\(at) takes a string, found \(field.value.kindDescription)")
                }
                condition = .prefix(prefix)
            case "$contains": condition = .contains(try operand(field.value, at: at))
            default:
                throw ValidationError(
                    "\(location): unknown operator \(Names.quoted(field.key)) (known: $eq $ne $gt $gte $lt $lte $in $nin $exists $prefix $contains)"
                )
            }
            conditions.append(.condition(path, condition))
        }
        return conditions
    }

    private static func operand(_ json: JSON, at location: String) throws(ValidationError) -> Value {
        do {
            try RecordData.validateValue(json, at: location)
        } catch {
            throw ValidationError(error.message)
        }
        return Value(json)
    }

    /// Whether `object` matches.
    public func matches(_ object: some FieldSource) -> Bool {
        switch self {
        case .all(let parts): return parts.allSatisfy { $0.matches(object) }
        case .any(let parts): return parts.contains { $0.matches(object) }
        case .condition(let path, let condition): return condition.matches(object.value(at: path))
        }
    }

    /// The paths the filter reads.
    public var paths: Set<FieldPath> {
        switch self {
        case .all(let parts), .any(let parts): return parts.reduce(into: []) { $0.formUnion($1.paths) }
        case .condition(let path, _): return [path]
        }
    }
}

extension Filter.Condition {
    public func matches(_ value: Value?) -> Bool {
        switch self {
        case .equal(let operand): return value.map { $0 == operand } ?? false
        case .notEqual(let operand): return value.map { $0 != operand } ?? true
        case .greater(let operand): return sameKind(value, operand) { Value.compare($0, operand) > 0 }
        case .greaterOrEqual(let operand): return sameKind(value, operand) { Value.compare($0, operand) >= 0 }
        case .less(let operand): return sameKind(value, operand) { Value.compare($0, operand) < 0 }
        case .lessOrEqual(let operand): return sameKind(value, operand) { Value.compare($0, operand) <= 0 }
        case .oneOf(let operands): return value.map { Self.sorted(operands, contain: $0) } ?? false
        case .noneOf(let operands): return value.map { !Self.sorted(operands, contain: $0) } ?? true
        case .exists(let flag): return (value != nil) == flag
        case .prefix(let prefix):
            guard case .string(let string)? = value else { return false }
            return string.utf8.starts(with: prefix.utf8)
        case .contains(let operand):
            guard case .array(let elements)? = value else { return false }
            return elements.contains { $0 == operand }
        }
    }

    private static func sorted(_ operands: [Value], contain value: Value) -> Bool {
        var low = 0
        var high = operands.count
        while low < high {
            let middle = (low + high) / 2
            let order = Value.compare(operands[middle], value)
            if order == 0 { return true }
            if order < 0 { low = middle + 1 } else { high = middle }
        }
        return false
    }

    private func sameKind(_ value: Value?, _ operand: Value, _ test: (Value) -> Bool) -> Bool {
        guard let value, value.kind == operand.kind else { return false }
        return test(value)
    }
}
