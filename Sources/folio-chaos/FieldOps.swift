import FolioJSON

/// Field operations (`ops` of an update) as the issue 10 protocol defines them, written again here so
/// that the checks do not share foliod's code: each `"<dotted path>": {"$op": operand}` is applied in
/// order, after the merge patch. Missing objects on the way are made (except for `$unset`); a missing
/// field counts as 0 for `$inc` and as `[]` for the array operations.
enum FieldOps {
    /// The data after `ops`, or nil when one does not apply (`$inc` on a non-number, an array
    /// operation on a non-array, a path through a non-object): foliod refuses those with bad_request.
    static func apply(_ ops: JSONObject, to data: JSONObject) -> JSONObject? {
        var result = data
        for field in ops {
            guard case .object(let spec) = field.value, spec.count == 1 else { return nil }
            let path = field.key.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard apply(spec.fields[0].key, spec.fields[0].value, at: path[...], in: &result) else { return nil }
        }
        return result
    }

    private static func apply(
        _ name: String, _ operand: JSON, at path: ArraySlice<String>, in object: inout JSONObject
    ) -> Bool {
        let key = path.first!
        if path.count > 1 {
            var nested: JSONObject
            switch object[key] {
            case nil:
                if name == "$unset" { return true }
                nested = JSONObject()
            case .object(let existing)? where !MergePatch.isTypedValue(existing):
                nested = existing
            default:
                return false
            }
            guard apply(name, operand, at: path.dropFirst(), in: &nested) else { return false }
            object[key] = .object(nested)
            return true
        }
        switch name {
        case "$set":
            object[key] = operand
        case "$unset":
            object[key] = nil
        case "$inc":
            switch (object[key] ?? .int(0), operand) {
            case (.int(let a), .int(let b)):
                let (sum, overflow) = a.addingReportingOverflow(b)
                guard !overflow else { return false }
                object[key] = .int(sum)
            case (.int(let a), .double(let b)): object[key] = .double(Double(a) + b)
            case (.double(let a), .int(let b)): object[key] = .double(a + Double(b))
            case (.double(let a), .double(let b)): object[key] = .double(a + b)
            default: return false
            }
        case "$push", "$addToSet", "$pull":
            guard case .array(let values) = operand else { return false }
            var elements: [JSON]
            switch object[key] {
            case nil: elements = []
            case .array(let existing)?: elements = existing
            default: return false
            }
            switch name {
            case "$push":
                elements += values
            case "$addToSet":
                for value in values where !elements.contains(where: { sameValue($0, value) }) { elements.append(value) }
            default:
                elements.removeAll { element in values.contains { sameValue($0, element) } }
            }
            object[key] = .array(elements)
        default:
            return false
        }
        return true
    }

    /// Equality by value, as `$addToSet` and `$pull` compare: `1` equals `1.0`, objects in any key order.
    static func sameValue(_ a: JSON, _ b: JSON) -> Bool {
        switch (a, b) {
        case (.int(let x), .double(let y)), (.double(let y), .int(let x)): return Double(x) == y
        case (.array(let x), .array(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { sameValue($0, $1) }
        case (.object(let x), .object(let y)):
            return x.count == y.count
                && x.allSatisfy { field in y[field.key].map { sameValue(field.value, $0) } ?? false }
        default: return a == b
        }
    }
}
