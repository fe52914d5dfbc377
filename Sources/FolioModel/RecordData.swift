import FolioJSON

/// Checks the user data of a `create` and the patch of an `update` before anything is stored.
public enum RecordData {
    /// Data for a new object: an object whose top-level names are not reserved and whose nested `$`
    /// objects are well-formed typed values. In op n of a batch, `results` is `0..<n`: values may
    /// be `{"$result": i}` for i in it. Returns whether any was.
    @discardableResult
    public static func validate(data: JSONObject, results: Range<Int>? = nil) throws(ValidationError) -> Bool {
        var found = false
        for field in data {
            try Names.validateTopLevelField(field.key)
            try validate(value: field.value, at: field.key, results: results, found: &found)
        }
        return found
    }

    /// A JSON Merge Patch (RFC 7386) of an object's data: as `validate(data:)`, with `null` allowed
    /// anywhere as "remove this field".
    @discardableResult
    public static func validate(patch: JSONObject, results: Range<Int>? = nil) throws(ValidationError) -> Bool {
        try validate(data: patch, results: results)
    }

    /// A value anywhere in a record or a query: its `$` objects must be well-formed typed values.
    @discardableResult
    public static func validateValue(_ value: JSON, at path: String, results: Range<Int>? = nil) throws(ValidationError)
        -> Bool
    {
        var found = false
        try validate(value: value, at: path, results: results, found: &found)
        return found
    }

    private static func validate(value: JSON, at path: String, results: Range<Int>?, found: inout Bool)
        throws(ValidationError)
    {
        var trail: [PathStep] = []
        do throws(ValidationError) {
            try validate(value: value, trail: &trail, results: results, found: &found)
        } catch {
            throw ValidationError("field \(Names.quoted(path + trail.map(\.text).joined())): \(error.message)")
        }
    }

    /// One step below a field, named only if an error needs the path: building the text at every
    /// level would cost the depth times the line's size.
    private enum PathStep {
        case key(String)
        case index(Int)

        var text: String {
            switch self {
            case .key(let key): return "." + key
            case .index(let index): return "[\(index)]"
            }
        }
    }

    private static func validate(value: JSON, trail: inout [PathStep], results: Range<Int>?, found: inout Bool)
        throws(ValidationError)
    {
        switch value {
        case .object(let object):
            if let results, object.count == 1, object.fields[0].key == "$result" {
                guard let index = BatchOperation.resultIndex(of: object), results.contains(index) else {
                    if results.isEmpty {
                        throw ValidationError(
                            "{\"$result\": n} names an earlier op of the batch, and the first op has none")
                    }
                    throw ValidationError(
                        "{\"$result\": n} names an earlier op of the batch: n from 0 to \(results.upperBound - 1)")
                }
                found = true
                return
            }
            if try TypedValue.parse(object) != nil { return }
            for field in object {
                trail.append(.key(field.key))
                try validate(value: field.value, trail: &trail, results: results, found: &found)
                trail.removeLast()
            }
        case .array(let elements):
            for (index, element) in elements.enumerated() {
                trail.append(.index(index))
                try validate(value: element, trail: &trail, results: results, found: &found)
                trail.removeLast()
            }
        default:
            return
        }
    }
}

/// JSON Merge Patch (RFC 7386): objects merge key by key, `null` removes, anything else replaces.
/// Typed values (`$date`, `$ref`) are atomic: they replace, never merge.
public enum MergePatch {
    /// Linear in the sizes of both: the target's fields keep their places (or go, for a `null`), and
    /// the patch's new keys follow in the patch's order.
    public static func apply(_ patch: JSONObject, to target: JSONObject) -> JSONObject {
        guard !patch.isEmpty else { return target }
        var fields: [JSONObject.Field] = []
        fields.reserveCapacity(target.count + patch.count)
        for field in target {
            guard let change = patch[field.key] else {
                fields.append(field)
                continue
            }
            if !change.isNull { fields.append(JSONObject.Field(key: field.key, value: apply(change, to: field.value))) }
        }
        for field in patch where !field.value.isNull && target[field.key] == nil {
            fields.append(JSONObject.Field(key: field.key, value: apply(field.value, to: nil)))
        }
        return JSONObject(fields)
    }

    static func apply(_ patch: JSON, to target: JSON?) -> JSON {
        guard case .object(let patchObject) = patch, TypedValue.recognize(patchObject) == nil else { return patch }
        if case .object(let targetObject)? = target, TypedValue.recognize(targetObject) == nil {
            return .object(apply(patchObject, to: targetObject))
        }
        return .object(apply(patchObject, to: JSONObject()))
    }
}
