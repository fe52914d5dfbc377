import FolioJSON

/// An optional schema of one collection: the type of each named top-level field, which are
/// required, what happens to an object when the target of one of its references is deleted, and
/// whether fields not named are allowed. Collections without one stay schemaless.
public struct Schema: Sendable, Equatable {
    public indirect enum FieldType: Sendable, Equatable {
        case string, number, integer, boolean, date, any
        /// A `{"$file"}`: the name of a stored file.
        case file
        /// A `{"$ref"}`, to the given collection if one is named.
        case ref(collection: String?)
        /// An array, of elements of the given type if one is named.
        case array(items: FieldType?)
        case object

        public var name: String {
            switch self {
            case .string: return "string"
            case .number: return "number"
            case .integer: return "integer"
            case .boolean: return "boolean"
            case .date: return "date"
            case .file: return "file"
            case .any: return "any"
            case .ref: return "ref"
            case .array: return "array"
            case .object: return "object"
            }
        }

        /// The collection a reference (or an array of references) points into, if the type is one.
        public var referencedCollection: String?? {
            switch self {
            case .ref(let collection): return .some(collection)
            case .array(let items?): return items.referencedCollection
            default: return nil
            }
        }
    }

    /// What happens to an object when the object one of its references points at is deleted.
    public enum DeleteRule: String, Sendable, Equatable, CaseIterable {
        /// The reference dangles.
        case keep
        /// A reference field is set to null; a reference is removed from an array.
        case nullify
        /// The object is deleted too.
        case cascade
        /// Deleting the target fails with `conflict`.
        case deny
    }

    public struct Field: Sendable, Equatable {
        public var name: String
        public var type: FieldType
        /// Present and not null. A field that is not required may be missing or null.
        public var required: Bool
        public var onTargetDelete: DeleteRule
        /// The referenced objects belong to this one: one is deleted when its last owning
        /// reference goes away.
        public var owns: Bool
    }

    public var collection: String
    public var fields: [Field]
    public var additionalFields: Bool

    public func field(named name: String) -> Field? { fields.first { $0.name == name } }

    /// `{"collection", "fields": {"<name>": {type, required?, ref?, items?, onTargetDelete?, owns?}},
    /// "additionalFields"?}` as `schema.define` and the log hold it.
    public init(parsing json: JSON) throws(ValidationError) {
        guard case .object(let object) = json else { throw ValidationError("a schema must be an object") }
        for key in object.keys where !["collection", "fields", "additionalFields"].contains(key) {
            throw ValidationError("schema: unknown field \(Names.quoted(key))")
        }
        guard case .string(let collection)? = object["collection"] else {
            throw ValidationError("schema needs \"collection\", a string")
        }
        try Names.validateCollection(collection)
        guard case .object(let specs)? = object["fields"] else {
            throw ValidationError("schema needs \"fields\": an object of field name to {\"type\": ...}")
        }
        var additional = true
        if let flag = object["additionalFields"], !flag.isNull {
            guard case .bool(let value) = flag else {
                throw ValidationError("schema: \"additionalFields\" must be true or false")
            }
            additional = value
        }
        var fields: [Field] = []
        for spec in specs {
            try Names.validateTopLevelField(spec.key)
            fields.append(try Self.field(spec.key, spec.value))
        }
        self.collection = collection
        self.fields = fields
        additionalFields = additional
    }

    private static func field(_ name: String, _ json: JSON) throws(ValidationError) -> Field {
        guard case .object(let spec) = json else {
            throw ValidationError("schema field \(Names.quoted(name)) must be an object with \"type\"")
        }
        for key in spec.keys where !["type", "required", "ref", "items", "onTargetDelete", "owns"].contains(key) {
            throw ValidationError("schema field \(Names.quoted(name)): unknown key \(Names.quoted(key))")
        }
        let type = try fieldType(spec, at: name)
        var required = false
        if let flag = spec["required"], !flag.isNull {
            guard case .bool(let value) = flag else {
                throw ValidationError("schema field \(Names.quoted(name)): \"required\" must be true or false")
            }
            required = value
        }
        var rule = DeleteRule.keep
        if let text = spec["onTargetDelete"], !text.isNull {
            guard case .string(let value) = text, let parsed = DeleteRule(rawValue: value) else {
                throw ValidationError(
                    "schema field \(Names.quoted(name)): \"onTargetDelete\" must be keep, nullify, cascade or deny")
            }
            rule = parsed
        }
        var owns = false
        if let flag = spec["owns"], !flag.isNull {
            guard case .bool(let value) = flag else {
                throw ValidationError("schema field \(Names.quoted(name)): \"owns\" must be true or false")
            }
            owns = value
        }
        if rule != .keep || owns {
            guard type.referencedCollection != nil else {
                throw ValidationError(
                    "schema field \(Names.quoted(name)): onTargetDelete and owns apply to fields of type ref or an array of refs"
                )
            }
        }
        if rule == .nullify && required, case .ref = type {
            throw ValidationError(
                "schema field \(Names.quoted(name)): a required field cannot be nullified; use cascade, deny or keep")
        }
        return Field(name: name, type: type, required: required, onTargetDelete: rule, owns: owns)
    }

    private static func fieldType(_ spec: JSONObject, at name: String) throws(ValidationError) -> FieldType {
        guard case .string(let typeName)? = spec["type"] else {
            throw ValidationError(
                "schema field \(Names.quoted(name)) needs \"type\": string, number, integer, boolean, date, ref, array, object, file or any"
            )
        }
        switch typeName {
        case "string", "number", "integer", "boolean", "date", "file", "object", "any":
            for key in ["ref", "items"] where spec[key] != nil && spec[key] != .null {
                throw ValidationError(
                    "schema field \(Names.quoted(name)): \"\(key)\" applies to type \(key == "ref" ? "ref" : "array")")
            }
            switch typeName {
            case "string": return .string
            case "number": return .number
            case "integer": return .integer
            case "boolean": return .boolean
            case "date": return .date
            case "file": return .file
            case "object": return .object
            default: return .any
            }
        case "ref":
            var collection: String?
            if let target = spec["ref"], !target.isNull {
                guard case .string(let value) = target else {
                    throw ValidationError("schema field \(Names.quoted(name)): \"ref\" names a collection")
                }
                try Names.validateCollection(value)
                collection = value
            }
            return .ref(collection: collection)
        case "array":
            guard let items = spec["items"], !items.isNull else { return .array(items: nil) }
            guard case .object(let itemSpec) = items else {
                throw ValidationError(
                    "schema field \(Names.quoted(name)): \"items\" must be a type spec, e.g. {\"type\": \"ref\", \"ref\": \"Item\"}"
                )
            }
            for key in itemSpec.keys where !["type", "ref", "items"].contains(key) {
                throw ValidationError("schema field \(Names.quoted(name)).items: unknown key \(Names.quoted(key))")
            }
            return .array(items: try fieldType(itemSpec, at: name + "[]"))
        default:
            throw ValidationError("schema field \(Names.quoted(name)): unknown type \(Names.quoted(typeName))")
        }
    }

    public var json: JSON {
        var specs = JSONObject()
        for field in fields {
            var spec = Self.typeJSON(field.type)
            if field.required { spec["required"] = true }
            if field.onTargetDelete != .keep { spec["onTargetDelete"] = .string(field.onTargetDelete.rawValue) }
            if field.owns { spec["owns"] = true }
            specs[field.name] = .object(spec)
        }
        return [
            "collection": .string(collection), "fields": .object(specs), "additionalFields": .bool(additionalFields),
        ]
    }

    private static func typeJSON(_ type: FieldType) -> JSONObject {
        var spec: JSONObject = ["type": .string(type.name)]
        switch type {
        case .ref(let collection?): spec["ref"] = .string(collection)
        case .array(let items?): spec["items"] = .object(typeJSON(items))
        default: break
        }
        return spec
    }

    // MARK: Validation

    /// Checks an object's data: every field named has its type (or is missing or null, unless
    /// required), and no other field appears unless `additionalFields`.
    public func validate(_ data: JSONObject) throws(ValidationError) {
        for field in fields {
            guard let value = data[field.name], !value.isNull else {
                if field.required {
                    throw ValidationError(
                        "field \(Names.quoted(field.name)) is required by the schema of \(collection)")
                }
                continue
            }
            try Self.check(value, field.type, at: field.name)
        }
        if !additionalFields {
            for key in data.keys where field(named: key) == nil {
                throw ValidationError(
                    "field \(Names.quoted(key)) is not in the schema of \(collection), which allows no other fields")
            }
        }
    }

    private static func check(_ value: JSON, _ type: FieldType, at path: String) throws(ValidationError) {
        func fail(_ expected: String) -> ValidationError {
            ValidationError("field \(Names.quoted(path)): expected \(expected), got \(describe(value))")
        }
        switch type {
        case .any: return
        case .string: guard case .string = value else { throw fail("string") }
        case .number:
            switch value {
            case .int, .double: return
            default: throw fail("number")
            }
        case .integer:
            guard case .int = value else { throw fail("integer") }
        case .boolean: guard case .bool = value else { throw fail("boolean") }
        case .date:
            guard case .object(let object) = value, case .date? = TypedValue.recognize(object) else {
                throw fail("date")
            }
        case .file:
            guard case .object(let object) = value, case .file? = TypedValue.recognize(object) else {
                throw fail("file")
            }
        case .ref(let collection):
            guard case .object(let object) = value, case .reference(let target, _)? = TypedValue.recognize(object)
            else { throw fail("ref") }
            if let collection, target != collection { throw fail("ref to \(collection)") }
        case .object:
            guard case .object(let object) = value, TypedValue.recognize(object) == nil else { throw fail("object") }
        case .array(let items):
            guard case .array(let elements) = value else { throw fail("array") }
            guard let items else { return }
            for (index, element) in elements.enumerated() { try check(element, items, at: "\(path)[\(index)]") }
        }
    }

    /// The kind of a value, for errors: typed values by their type.
    private static func describe(_ value: JSON) -> String {
        switch value {
        case .null: return "null"
        case .bool: return "boolean"
        case .int: return "integer"
        case .double: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object(let object):
            switch TypedValue.recognize(object) {
            case .date?: return "date"
            case .reference(let collection, _)?: return "ref to \(collection)"
            case .file?: return "file"
            case nil: return "object"
            }
        }
    }
}
