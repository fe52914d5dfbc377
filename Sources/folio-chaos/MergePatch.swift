import FolioJSON

/// JSON Merge Patch (RFC 7386) as PROTOCOL.md §5.4 defines it for Folio: `null` removes, an object
/// merges key by key (onto a missing field, a non-object or a typed value it starts from an empty
/// object, dropping its `null`s), anything else, typed values included, replaces.
enum MergePatch {
    static func apply(_ patch: JSONObject, to target: JSONObject) -> JSONObject {
        var result = target
        for field in patch {
            switch field.value {
            case .null:
                result[field.key] = nil
            case .object(let inner) where !isTypedValue(inner):
                let base: JSONObject
                if case .object(let existing)? = result[field.key], !isTypedValue(existing) {
                    base = existing
                } else {
                    base = JSONObject()
                }
                result[field.key] = .object(apply(inner, to: base))
            default:
                result[field.key] = field.value
            }
        }
        return result
    }

    /// `{"$date": …}` or `{"$ref": …}`: atomic, never merged into.
    static func isTypedValue(_ object: JSONObject) -> Bool {
        object.count == 1 && (object.keys[0] == "$date" || object.keys[0] == "$ref")
    }
}
