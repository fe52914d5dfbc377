import FolioJSON

/// A collection's schema as the relations model sees it: typed top-level fields, the delete rule
/// of each reference field and whether it owns its targets.
struct ModelSchema: Equatable {
    enum FieldType: Equatable {
        case string, integer, object, any
        case ref(String)
        case refArray(String)

        var referencedCollection: String? {
            switch self {
            case .ref(let collection), .refArray(let collection): return collection
            default: return nil
            }
        }
    }

    enum Rule: String, CaseIterable {
        case keep, nullify, cascade, deny
    }

    struct Field: Equatable {
        var name: String
        var type: FieldType
        var required = false
        var rule = Rule.keep
        var owns = false
    }

    var collection: String
    var fields: [Field]

    var hasOwningFields: Bool { fields.contains(where: \.owns) }

    /// The field a reference at `path` sits in, if it has rules: a top-level field of a reference type.
    func referenceField(at path: String) -> Field? {
        fields.first { $0.name == path && $0.type.referencedCollection != nil }
    }

    /// The fields of `schema.define`, written as foliod gives them back (defaults left out).
    var fieldsJSON: JSON {
        .object(
            JSONObject(
                fields.map { field in
                    var spec: JSONObject
                    switch field.type {
                    case .string: spec = ["type": "string"]
                    case .integer: spec = ["type": "integer"]
                    case .object: spec = ["type": "object"]
                    case .any: spec = ["type": "any"]
                    case .ref(let collection): spec = ["type": "ref", "ref": .string(collection)]
                    case .refArray(let collection):
                        spec = ["type": "array", "items": ["type": "ref", "ref": .string(collection)]]
                    }
                    if field.required { spec["required"] = true }
                    if field.rule != .keep { spec["onTargetDelete"] = .string(field.rule.rawValue) }
                    if field.owns { spec["owns"] = true }
                    return JSONObject.Field(key: field.name, value: .object(spec))
                }))
    }

    /// The schema as `schema.define` answers it and the `schema.defined` event holds it.
    var json: JSON { ["collection": .string(collection), "fields": fieldsJSON, "additionalFields": true] }

    /// Why `data` does not fit, or nil: a field named with a value of another type, a required
    /// field missing or null.
    func violation(_ data: JSONObject) -> String? {
        for field in fields {
            guard let value = data[field.name], !value.isNull else {
                if field.required { return "field \"\(field.name)\" is required" }
                continue
            }
            if !Self.fits(value, field.type) { return "field \"\(field.name)\": \(value) is not of type \(field.type)" }
        }
        return nil
    }

    private static func fits(_ value: JSON, _ type: FieldType) -> Bool {
        switch type {
        case .any: return true
        case .string: if case .string = value { return true } else { return false }
        case .integer: if case .int = value { return true } else { return false }
        case .object:
            guard case .object(let object) = value else { return false }
            return !ModelData.isTyped(object)
        case .ref(let collection):
            guard let target = ModelData.reference(value), let key = ModelData.Key(ref: target) else { return false }
            return key.collection == collection
        case .refArray(let collection):
            guard case .array(let elements) = value else { return false }
            return elements.allSatisfy { fits($0, .ref(collection)) }
        }
    }
}
