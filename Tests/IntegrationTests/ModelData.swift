import FolioJSON

/// What the relations model knows of record data, written from the protocol's description and not
/// from FolioModel, so that it checks foliod instead of repeating it: references, value equality
/// and order, JSON Merge Patch and field operations.
enum ModelData {
    /// An object's key: its collection and id.
    struct Key: Hashable, CustomStringConvertible {
        let collection: String
        let id: String

        var ref: String { collection + "/" + id }
        var refJSON: JSON { ["$ref": .string(ref)] }
        var description: String { ref }

        /// `Coll/id` split at its first slash.
        init?(ref: String) {
            guard let slash = ref.firstIndex(of: "/") else { return nil }
            collection = String(ref[..<slash])
            id = String(ref[ref.index(after: slash)...])
        }

        init(_ collection: String, _ id: String) {
            self.collection = collection
            self.id = id
        }
    }

    /// Byte order of UTF-8: the order of ids in foliod's indexes.
    static func precedes(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

    /// `{"$ref": "Coll/id"}` and `{"$date": ...}`: atomic values, never merged or descended into.
    static func isTyped(_ object: JSONObject) -> Bool {
        object.count == 1 && (object.keys[0] == "$ref" || object.keys[0] == "$date")
    }

    /// The target of `{"$ref": "Coll/id"}`.
    static func reference(_ value: JSON?) -> String? {
        guard case .object(let object)? = value, object.count == 1, case .string(let target)? = object["$ref"] else {
            return nil
        }
        return target
    }

    /// Equal as the protocol compares values: numbers by value (1 equals 1.0), objects whatever
    /// their key order, arrays element by element.
    static func same(_ a: JSON?, _ b: JSON?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case (nil, _), (_, nil): return false
        case (.int(let x)?, .double(let y)?), (.double(let y)?, .int(let x)?): return Double(x) == y
        case (.array(let x)?, .array(let y)?): return x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
        case (.object(let x)?, .object(let y)?):
            return x.count == y.count && x.allSatisfy { field in y[field.key].map { same(field.value, $0) } ?? false }
        case (let x?, let y?): return x == y
        }
    }

    // MARK: References

    /// Every distinct (path, target) of the references in `data`, in the order first met: a path
    /// names object keys from the top, arrays are passed through.
    static func references(in data: JSONObject) -> [(path: String, target: String)] {
        var found: [(String, String)] = []
        var seen = Set<String>()
        func walk(_ value: JSON, _ path: String) {
            switch value {
            case .array(let elements):
                for element in elements { walk(element, path) }
            case .object(let object):
                if let target = reference(value) {
                    if seen.insert(path + "\u{0}" + target).inserted { found.append((path, target)) }
                    return
                }
                guard object.count > 0, !object.keys[0].hasPrefix("$") else { return }
                for field in object { walk(field.value, path + "." + field.key) }
            default:
                return
            }
        }
        for field in data { walk(field.value, field.key) }
        return found
    }

    /// The value at a dotted path, stepping into objects only.
    static func value(at path: [String], in data: JSONObject) -> JSON? {
        var current: JSON = .object(data)
        for segment in path {
            guard case .object(let object) = current, !isTyped(object), let next = object[segment] else { return nil }
            current = next
        }
        return current
    }

    /// The references `links` lists for a field's value, in order (duplicates kept): the value if
    /// it is one, the references among an array's elements (nested arrays flattened).
    static func linkTargets(_ value: JSON?) -> [String] {
        var targets: [String] = []
        func collect(_ value: JSON) {
            switch value {
            case .array(let elements): elements.forEach(collect)
            case .object:
                if let target = reference(value) { targets.append(target) }
            default: break
            }
        }
        if let value { collect(value) }
        return targets
    }

    // MARK: Order

    /// The kinds in the protocol's total order: missing < null < booleans < numbers < strings <
    /// dates < refs < arrays < objects.
    private static func rank(_ value: JSON?) -> Int {
        switch value {
        case nil: return 0
        case .null?: return 1
        case .bool?: return 2
        case .int?, .double?: return 3
        case .string?: return 4
        case .object(let object)? where object.keys == ["$date"]: return 5
        case .object(let object)? where object.keys == ["$ref"]: return 6
        case .array?: return 7
        case .object?: return 8
        }
    }

    /// Three-way comparison in the total order (enough of it for the values the workload sorts:
    /// numbers, strings, booleans, references).
    static func compare(_ a: JSON?, _ b: JSON?) -> Int {
        let (ra, rb) = (rank(a), rank(b))
        if ra != rb { return ra < rb ? -1 : 1 }
        func order<T: Comparable>(_ x: T, _ y: T) -> Int { x < y ? -1 : (x == y ? 0 : 1) }
        func bytes(_ x: String, _ y: String) -> Int { precedes(x, y) ? -1 : (x == y ? 0 : 1) }
        switch (a, b) {
        case (.bool(let x)?, .bool(let y)?): return order(x ? 1 : 0, y ? 1 : 0)
        case (.int(let x)?, .int(let y)?): return order(x, y)
        case (.int(let x)?, .double(let y)?): return order(Double(x), y)
        case (.double(let x)?, .int(let y)?): return order(x, Double(y))
        case (.double(let x)?, .double(let y)?): return order(x, y)
        case (.string(let x)?, .string(let y)?): return bytes(x, y)
        default:
            if let x = reference(a), let y = reference(b) { return bytes(x, y) }
            return bytes(a?.description ?? "", b?.description ?? "")
        }
    }

    // MARK: JSON Merge Patch (RFC 7386)

    /// Objects merge key by key, `null` removes, anything else (typed values included) replaces.
    static func mergePatch(_ patch: JSONObject, into target: JSONObject) -> JSONObject {
        var result = target
        for field in patch {
            result[field.key] = field.value.isNull ? nil : merge(field.value, into: result[field.key])
        }
        return result
    }

    private static func merge(_ patch: JSON, into target: JSON?) -> JSON {
        guard case .object(let patchObject) = patch, !isTyped(patchObject) else { return patch }
        if case .object(let targetObject)? = target, !isTyped(targetObject) {
            return .object(mergePatch(patchObject, into: targetObject))
        }
        return .object(mergePatch(patchObject, into: JSONObject()))
    }

    // MARK: Field operations

    /// One entry of an update's `ops`: `{"<path>": {"<name>": operand}}`.
    struct FieldOp {
        var path: [String]
        var name: String
        var operand: JSON

        var pathText: String { path.joined(separator: ".") }
        var spec: JSON { .object(JSONObject([JSONObject.Field(key: name, value: operand)])) }

        static func json(_ ops: [FieldOp]) -> JSON {
            .object(JSONObject(ops.map { JSONObject.Field(key: $0.pathText, value: $0.spec) }))
        }
    }

    /// Why a request is refused before it is looked at (bad_request): operands of the wrong shape,
    /// paths that overlap each other or the patch.
    static func problem(ops: [FieldOp], patch: JSONObject?) -> String? {
        guard !ops.isEmpty else { return "empty ops" }
        for (index, op) in ops.enumerated() {
            switch op.name {
            case "$inc":
                switch op.operand {
                case .int, .double: break
                default: return "\(op.pathText): $inc takes a number"
                }
            case "$push", "$addToSet", "$pull":
                guard case .array(let values) = op.operand, !values.isEmpty else {
                    return "\(op.pathText): \(op.name) takes a non-empty array"
                }
            case "$unset":
                guard op.operand == .bool(true) else { return "\(op.pathText): $unset takes true" }
            case "$set": break
            default: return "unknown operation \(op.name)"
            }
            for other in ops[..<index] where other.path.starts(with: op.path) || op.path.starts(with: other.path) {
                return "\(other.pathText) and \(op.pathText) overlap"
            }
            if let patch, touches(patch, op.path[...]) { return "\(op.pathText) is also in the patch" }
        }
        return nil
    }

    /// Whether the patch sets the path, one of its parents or something below it.
    private static func touches(_ patch: JSONObject, _ path: ArraySlice<String>) -> Bool {
        guard let value = patch[path.first!] else { return false }
        guard path.count > 1, case .object(let nested) = value, !isTyped(nested) else { return true }
        return touches(nested, path.dropFirst())
    }

    /// The data after the operations, in order; an error message for a field of the wrong kind.
    static func apply(_ ops: [FieldOp], to data: JSONObject) -> Result<JSONObject, ModelFailure> {
        var result = data
        for op in ops {
            if let failure = apply(op, at: op.path[...], in: &result) { return .failure(failure) }
        }
        return .success(result)
    }

    private static func apply(_ op: FieldOp, at path: ArraySlice<String>, in object: inout JSONObject) -> ModelFailure?
    {
        let key = path.first!
        let bad = { (why: String) in ModelFailure(.badRequest, "field \"\(op.pathText)\": \(why)") }
        if path.count > 1 {
            var nested = JSONObject()
            switch object[key] {
            case nil:
                if op.name == "$unset" { return nil }
            case .object(let existing)? where !isTyped(existing):
                nested = existing
            case _?:
                return bad("\(key) is not an object")
            }
            if let failure = apply(op, at: path.dropFirst(), in: &nested) { return failure }
            object[key] = .object(nested)
            return nil
        }
        let current = object[key]
        switch op.name {
        case "$unset":
            object[key] = nil
        case "$set":
            object[key] = op.operand
        case "$inc":
            switch (current ?? .int(0), op.operand) {
            case (.int(let a), .int(let b)):
                let (sum, overflow) = a.addingReportingOverflow(b)
                if overflow { return bad("$inc overflows") }
                object[key] = .int(sum)
            case (.int(let a), .double(let b)): object[key] = .double(Double(a) + b)
            case (.double(let a), .int(let b)): object[key] = .double(a + Double(b))
            case (.double(let a), .double(let b)): object[key] = .double(a + b)
            default: return bad("$inc needs a number")
            }
        default:
            var elements: [JSON]
            switch current {
            case nil: elements = []
            case .array(let existing)?: elements = existing
            case _?: return bad("\(op.name) needs an array")
            }
            guard case .array(let values) = op.operand else { return bad("no values") }
            switch op.name {
            case "$push":
                elements += values
            case "$addToSet":
                for value in values where !elements.contains(where: { same($0, value) }) { elements.append(value) }
            default:
                elements.removeAll { element in values.contains { same($0, element) } }
            }
            object[key] = .array(elements)
        }
        return nil
    }
}

/// A refusal the model predicts: the error code, a message for the failure report, details the
/// answer must carry (`index`, `requestKey`, `referrers`, versions).
struct ModelFailure: Error {
    enum Code: String {
        case badRequest = "bad_request"
        case notFound = "not_found"
        case conflict
    }

    var code: Code
    var message: String
    var details: [String: JSON] = [:]

    init(_ code: Code, _ message: String, details: [String: JSON] = [:]) {
        self.code = code
        self.message = message
        self.details = details
    }
}
