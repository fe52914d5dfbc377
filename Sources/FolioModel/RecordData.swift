import FolioJSON

/// Checks the user data of a `create` and the patch of an `update` before anything is stored.
public enum RecordData {
    /// Data for a new object: an object whose top-level names are not reserved and whose nested `$`
    /// objects are well-formed typed values.
    public static func validate(data: JSONObject) throws(ValidationError) {
        for field in data {
            try Names.validateTopLevelField(field.key)
            try validate(value: field.value, at: field.key)
        }
    }

    /// A JSON Merge Patch (RFC 7386) of an object's data: as `validate(data:)`, with `null` allowed
    /// anywhere as "remove this field".
    public static func validate(patch: JSONObject) throws(ValidationError) {
        try validate(data: patch)
    }

    /// A value anywhere in a record or a query: its `$` objects must be well-formed typed values.
    public static func validateValue(_ value: JSON, at path: String) throws(ValidationError) {
        try validate(value: value, at: path)
    }

    private static func validate(value: JSON, at path: String) throws(ValidationError) {
        switch value {
        case .object(let object):
            do {
                if try TypedValue.parse(object) != nil { return }
            } catch {
                throw ValidationError("field \(Names.quoted(path)): \(error.message)")
            }
            for field in object { try validate(value: field.value, at: path + "." + field.key) }
        case .array(let elements):
            for (index, element) in elements.enumerated() { try validate(value: element, at: "\(path)[\(index)]") }
        default:
            return
        }
    }
}

/// JSON Merge Patch (RFC 7386): objects merge key by key, `null` removes, anything else replaces.
/// Typed values (`$date`, `$ref`) are atomic: they replace, never merge.
public enum MergePatch {
    public static func apply(_ patch: JSONObject, to target: JSONObject) -> JSONObject {
        var result = target
        for field in patch {
            if field.value.isNull {
                result[field.key] = nil
            } else {
                result[field.key] = apply(field.value, to: result[field.key])
            }
        }
        return result
    }

    static func apply(_ patch: JSON, to target: JSON?) -> JSON {
        guard case .object(let patchObject) = patch, TypedValue.recognize(patchObject) == nil else { return patch }
        if case .object(let targetObject)? = target, TypedValue.recognize(targetObject) == nil {
            return .object(apply(patchObject, to: targetObject))
        }
        return .object(apply(patchObject, to: JSONObject()))
    }
}
