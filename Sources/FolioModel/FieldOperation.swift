import FolioJSON

/// The field operations of an `update` (`ops`): changes that need no read by the client, applied
/// with the merge patch. Each names a data path (`stats.views`); they are applied in the order given,
/// after the patch, and are a deterministic function of the object they are applied to, so an event
/// that records them replays to the same state.
public struct FieldOperations: Sendable, Equatable {
    public enum Operation: Sendable, Equatable {
        /// Adds a number; a missing field counts as 0.
        case increment(JSON)
        /// Appends values to an array; a missing field counts as [].
        case push([JSON])
        /// Appends each value not already in the array (by value: `1` equals `1.0`).
        case addToSet([JSON])
        /// Removes every element equal to one of the values.
        case pull([JSON])
        /// Removes the field.
        case unset
        /// Sets the field to the value, `null` included (a merge patch's `null` removes instead).
        case set(JSON)
    }

    public struct Entry: Sendable, Equatable {
        public var path: [String]
        public var operation: Operation

        public init(path: [String], operation: Operation) {
            self.path = path
            self.operation = operation
        }

        public var pathText: String { path.joined(separator: ".") }
    }

    public static let names = ["$set", "$inc", "$push", "$addToSet", "$pull", "$unset"]

    public var entries: [Entry]

    public init(_ entries: [Entry]) { self.entries = entries }

    public var isEmpty: Bool { entries.isEmpty }

    /// Parses `{"<path>": {"$inc": n} | {"$push": [v...]} | ...}` as a request or an event holds it.
    /// Values follow the record rules (typed values well formed); `patch` is the update's merge
    /// patch, whose fields the operations may not touch.
    public init(parsing json: JSON, beside patch: JSONObject?) throws(ValidationError) {
        var ignored = false
        try self.init(parsing: json, beside: patch, results: nil, found: &ignored)
    }

    /// As `init(parsing:beside:)`, in op n of a batch: values may be `{"$result": i}` for i in
    /// `results`; `found` tells whether any was.
    public init(parsing json: JSON, beside patch: JSONObject?, results: Range<Int>?, found: inout Bool)
        throws(ValidationError)
    {
        guard case .object(let object) = json else { throw ValidationError("\"ops\" must be an object of field paths") }
        var entries: [Entry] = []
        for field in object {
            let text = field.key
            let path = text.asciiSegments(separatedBy: ".")
            guard !path.contains(where: \.isEmpty), !path.contains(where: { $0.hasPrefix("$") }) else {
                throw ValidationError("ops: field path \(Names.quoted(text)) has an empty segment or a '$' segment")
            }
            try Names.validateTopLevelField(path[0])
            guard case .object(let spec) = field.value, !spec.isEmpty, spec.keys.allSatisfy({ $0.hasPrefix("$") })
            else {
                throw ValidationError(
                    "ops.\(text): expected operations, e.g. {\"$set\": v}, {\"$inc\": n}, {\"$push\": [...]}, {\"$addToSet\": [...]}, {\"$pull\": [...]} or {\"$unset\": true}"
                )
            }
            for (name, operand) in spec.fields.map({ ($0.key, $0.value) }) {
                entries.append(
                    Entry(
                        path: path,
                        operation: try Self.operation(name, operand, at: text, results: results, found: &found)))
            }
        }
        guard !entries.isEmpty else { throw ValidationError("\"ops\" is empty: give at least one field operation") }
        // Paths in a tree of their segments: a path that ends where another goes on, or goes on
        // where another ends, overlaps it. Linear in the segments.
        final class Node {
            var children: [String: Node] = [:]
            var path: [String]?
        }
        let root = Node()
        for entry in entries {
            var node = root
            for segment in entry.path {
                if let shorter = node.path {
                    throw ValidationError(
                        "ops: \(Names.quoted(shorter.joined(separator: "."))) and \(Names.quoted(entry.pathText)) overlap; give each field once"
                    )
                }
                if let next = node.children[segment] {
                    node = next
                } else {
                    let next = Node()
                    node.children[segment] = next
                    node = next
                }
            }
            if node.path == nil, let longer = node.children.first {
                throw ValidationError(
                    "ops: \(Names.quoted(entry.pathText)) and a field below it (\(Names.quoted(entry.pathText + "." + longer.key))) overlap; give each field once"
                )
            }
            node.path = entry.path
            if let patch, Self.touches(patch, entry.path) {
                throw ValidationError("field \(Names.quoted(entry.pathText)) is in both \"patch\" and \"ops\"")
            }
        }
        self.entries = entries
    }

    private static func operation(
        _ name: String, _ operand: JSON, at text: String, results: Range<Int>?, found: inout Bool
    ) throws(ValidationError)
        -> Operation
    {
        switch name {
        case "$inc":
            switch operand {
            case .int, .double: return .increment(operand)
            default: throw ValidationError("ops.\(text): $inc takes a number, found \(operand.kindDescription)")
            }
        case "$push", "$addToSet", "$pull":
            guard case .array(let values) = operand, !values.isEmpty else {
                throw ValidationError("ops.\(text): \(name) takes a non-empty array of values")
            }
            for (index, value) in values.enumerated() {
                if try RecordData.validateValue(value, at: "ops.\(text)[\(index)]", results: results) { found = true }
            }
            return name == "$push" ? .push(values) : name == "$addToSet" ? .addToSet(values) : .pull(values)
        case "$unset":
            guard operand == .bool(true) else { throw ValidationError("ops.\(text): $unset takes true") }
            return .unset
        case "$set":
            if try RecordData.validateValue(operand, at: "ops.\(text)", results: results) { found = true }
            return .set(operand)
        default:
            throw ValidationError(
                "ops.\(text): unknown operation \(Names.quoted(name)) (known: \(names.joined(separator: " ")))")
        }
    }

    /// Whether the merge patch sets `path`, one of its parents, or something below it.
    private static func touches(_ patch: JSONObject, _ path: [String]) -> Bool {
        guard let value = patch[path[0]] else { return false }
        guard path.count > 1, case .object(let nested) = value, TypedValue.recognize(nested) == nil else { return true }
        return touches(nested, Array(path.dropFirst()))
    }

    /// `{"<path>": {"<operation>": operand, ...}, ...}`: each path once, its operations in order.
    public var json: JSON {
        var fields: [JSONObject.Field] = []
        for entry in entries {
            let (name, operand): (String, JSON)
            switch entry.operation {
            case .increment(let number): (name, operand) = ("$inc", number)
            case .push(let values): (name, operand) = ("$push", .array(values))
            case .addToSet(let values): (name, operand) = ("$addToSet", .array(values))
            case .pull(let values): (name, operand) = ("$pull", .array(values))
            case .unset: (name, operand) = ("$unset", true)
            case .set(let value): (name, operand) = ("$set", value)
            }
            if let last = fields.last, last.key == entry.pathText, case .object(var spec) = last.value,
                spec[name] == nil
            {
                spec[name] = operand
                fields[fields.count - 1].value = .object(spec)
            } else {
                fields.append(JSONObject.Field(key: entry.pathText, value: .object([name: operand])))
            }
        }
        return .object(JSONObject(fields))
    }

    /// The data after every operation. Throws if a field has the wrong kind (`$inc` on a string, an
    /// array operation on a non-array), naming it.
    public func apply(to data: JSONObject) throws(ValidationError) -> JSONObject {
        var result = data
        for entry in entries { try Self.apply(entry, at: entry.path[...], in: &result) }
        return result
    }

    private static func apply(_ entry: Entry, at path: ArraySlice<String>, in object: inout JSONObject)
        throws(ValidationError)
    {
        let key = path.first!
        if path.count > 1 {
            var nested: JSONObject
            switch object[key] {
            case nil:
                if case .unset = entry.operation { return }
                nested = JSONObject()
            case .object(let existing)? where TypedValue.recognize(existing) == nil:
                nested = existing
            case let other?:
                throw ValidationError(
                    "field \(Names.quoted(entry.pathText)): \(Names.quoted(key)) holds \(other.kindDescription), not an object"
                )
            }
            try apply(entry, at: path.dropFirst(), in: &nested)
            object[key] = .object(nested)
            return
        }
        let current = object[key]
        switch entry.operation {
        case .unset:
            object[key] = nil
        case .set(let value):
            object[key] = value
        case .increment(let amount):
            object[key] = try increment(current, by: amount, entry)
        case .push(let values), .addToSet(let values), .pull(let values):
            var elements: [JSON]
            switch current {
            case nil: elements = []
            case .array(let existing)?: elements = existing
            case let other?:
                throw ValidationError(
                    "field \(Names.quoted(entry.pathText)): expected an array, found \(other.kindDescription)")
            }
            switch entry.operation {
            case .push: elements += values
            case .addToSet:
                var present = Set(elements.map { Value($0).hashKey })
                for value in values where present.insert(Value(value).hashKey).inserted { elements.append(value) }
            default:
                let removed = Set(values.map { Value($0).hashKey })
                elements.removeAll { removed.contains(Value($0).hashKey) }
            }
            object[key] = .array(elements)
        }
    }

    private static func increment(_ current: JSON?, by amount: JSON, _ entry: Entry) throws(ValidationError) -> JSON {
        switch (current ?? .int(0), amount) {
        case (.int(let a), .int(let b)):
            let (sum, overflow) = a.addingReportingOverflow(b)
            guard !overflow else {
                throw ValidationError("field \(Names.quoted(entry.pathText)): $inc overflows a 64-bit integer")
            }
            return .int(sum)
        case (.int(let a), .double(let b)): return try finite(Double(a) + b, entry)
        case (.double(let a), .int(let b)): return try finite(a + Double(b), entry)
        case (.double(let a), .double(let b)): return try finite(a + b, entry)
        case (let other, _):
            throw ValidationError(
                "field \(Names.quoted(entry.pathText)): $inc needs a number, found \(other.kindDescription)")
        }
    }

    private static func finite(_ value: Double, _ entry: Entry) throws(ValidationError) -> JSON {
        guard value.isFinite else {
            throw ValidationError("field \(Names.quoted(entry.pathText)): $inc goes beyond a double's range")
        }
        return .double(value)
    }
}
