import FolioJSON

/// One `where` clause of a query of `Record` (PROTOCOL.md §6.1), made from key paths:
///
/// ```swift
/// TodoListItem.query(\.title == "x", \.n > 3, .prefix(\.title, "B") || .exists(\.description, false))
/// ```
///
/// `== nil` means the field is missing (`$exists: false`) and `!= nil` that it is present: FolioKit
/// leaves nil optionals out of the data it writes. Dates compare as `$date`, references as `$ref`.
public struct QueryCondition<Record: FolioRecord>: Sendable {
    /// The where-object, or why it could not be made (thrown when the query runs).
    let clause: Result<JSONObject, FolioError>

    /// A condition on the field `keyPath` names: `{name: condition}`.
    static func on<Value>(_ keyPath: KeyPath<Record, Value>, _ condition: () throws -> JSON) -> QueryCondition {
        do {
            return QueryCondition(clause: .success([try FieldProbe<Record>.shared.name(of: keyPath): try condition()]))
        } catch let error as FolioError {
            return QueryCondition(clause: .failure(error))
        } catch {
            return QueryCondition(clause: .failure(.encoding("\(error)")))
        }
    }

    static func operation<Value: Encodable>(_ keyPath: KeyPath<Record, Value>, _ name: String, _ operand: Value)
        -> QueryCondition
    {
        on(keyPath) { .object(JSONObject([JSONObject.Field(key: name, value: try RecordEncoder.encode(operand))])) }
    }

    /// The field equals one of `values` (`$in`).
    public static func `in`<Value: Encodable>(_ keyPath: KeyPath<Record, Value>, _ values: [Value]) -> QueryCondition {
        on(keyPath) { ["$in": .array(try values.map { try RecordEncoder.encode($0) })] }
    }

    /// The field equals none of `values`, or is missing (`$nin`).
    public static func notIn<Value: Encodable>(_ keyPath: KeyPath<Record, Value>, _ values: [Value]) -> QueryCondition {
        on(keyPath) { ["$nin": .array(try values.map { try RecordEncoder.encode($0) })] }
    }

    /// The field is present (even as null), or with `false` missing (`$exists`).
    public static func exists<Value>(_ keyPath: KeyPath<Record, Value>, _ present: Bool = true) -> QueryCondition {
        on(keyPath) { ["$exists": .bool(present)] }
    }

    /// The field is a string that starts with `prefix`, byte-wise (`$prefix`).
    public static func prefix(_ keyPath: KeyPath<Record, String>, _ prefix: String) -> QueryCondition {
        on(keyPath) { ["$prefix": .string(prefix)] }
    }

    public static func prefix(_ keyPath: KeyPath<Record, String?>, _ prefix: String) -> QueryCondition {
        on(keyPath) { ["$prefix": .string(prefix)] }
    }

    /// The field is an array holding an element equal to `element` (`$contains`).
    public static func contains<Element: Encodable>(_ keyPath: KeyPath<Record, [Element]>, _ element: Element)
        -> QueryCondition
    {
        on(keyPath) { ["$contains": try RecordEncoder.encode(element)] }
    }

    public static func contains<Element: Encodable>(_ keyPath: KeyPath<Record, [Element]?>, _ element: Element)
        -> QueryCondition
    {
        on(keyPath) { ["$contains": try RecordEncoder.encode(element)] }
    }

    /// Every condition holds: one where-object when their fields differ (operators on one field
    /// are merged), else `$and`.
    public static func all(_ conditions: [QueryCondition]) -> QueryCondition {
        do {
            let clauses = try conditions.map { try $0.clause.get() }
            var merged = JSONObject()
            for clause in clauses {
                for field in clause {
                    guard let existing = merged[field.key] else {
                        merged[field.key] = field.value
                        continue
                    }
                    guard !field.key.hasPrefix("$"), case .object(let left) = existing,
                        case .object(let right) = field.value,
                        isOperators(left), isOperators(right), Set(left.keys).isDisjoint(with: right.keys)
                    else { return QueryCondition(clause: .success(["$and": .array(clauses.map { .object($0) })])) }
                    merged[field.key] = .object(JSONObject(left.fields + right.fields))
                }
            }
            return QueryCondition(clause: .success(merged))
        } catch {
            return QueryCondition(clause: .failure(error as! FolioError))
        }
    }

    /// At least one condition holds (`$or`; nested `$or`s are flattened).
    public static func any(_ conditions: [QueryCondition]) -> QueryCondition {
        do {
            var alternatives: [JSON] = []
            for clause in try conditions.map({ try $0.clause.get() }) {
                if clause.count == 1, case .array(let inner)? = clause["$or"] {
                    alternatives += inner
                } else {
                    alternatives.append(.object(clause))
                }
            }
            return QueryCondition(clause: .success(["$or": .array(alternatives)]))
        } catch {
            return QueryCondition(clause: .failure(error as! FolioError))
        }
    }
}

private func isOperators(_ object: JSONObject) -> Bool {
    !object.isEmpty && object.keys.allSatisfy { $0.hasPrefix("$") && $0 != "$date" && $0 != "$ref" && $0 != "$file" }
}

/// Equality; `== nil`: the field is missing.
public func == <Record, Value: Encodable>(keyPath: KeyPath<Record, Value>, value: Value) -> QueryCondition<Record> {
    QueryCondition.on(keyPath) {
        let operand = try RecordEncoder.encode(value)
        return operand.isNull ? ["$exists": false] : operand
    }
}

/// Inequality (a missing field matches); `!= nil`: the field is present.
public func != <Record, Value: Encodable>(keyPath: KeyPath<Record, Value>, value: Value) -> QueryCondition<Record> {
    QueryCondition.on(keyPath) {
        let operand = try RecordEncoder.encode(value)
        return operand.isNull ? ["$exists": true] : ["$ne": operand]
    }
}

/// The range operators match only values of the operand's kind (PROTOCOL.md §6.2).
public func < <Record, Value: Encodable>(keyPath: KeyPath<Record, Value>, value: Value) -> QueryCondition<Record> {
    .operation(keyPath, "$lt", value)
}

public func <= <Record, Value: Encodable>(keyPath: KeyPath<Record, Value>, value: Value) -> QueryCondition<Record> {
    .operation(keyPath, "$lte", value)
}

public func > <Record, Value: Encodable>(keyPath: KeyPath<Record, Value>, value: Value) -> QueryCondition<Record> {
    .operation(keyPath, "$gt", value)
}

public func >= <Record, Value: Encodable>(keyPath: KeyPath<Record, Value>, value: Value) -> QueryCondition<Record> {
    .operation(keyPath, "$gte", value)
}

public func && <Record>(lhs: QueryCondition<Record>, rhs: QueryCondition<Record>) -> QueryCondition<Record> {
    .all([lhs, rhs])
}

public func || <Record>(lhs: QueryCondition<Record>, rhs: QueryCondition<Record>) -> QueryCondition<Record> {
    .any([lhs, rhs])
}
