import FolioJSON

/// A write the relations workload sends: its meaning for the model and its request line.
struct ModelWrite {
    typealias Key = ModelData.Key

    /// The id an update or delete names: given, or `{"$result": n}` (op n of the same batch).
    enum ObjectID {
        case given(String)
        case result(Int)

        var json: JSON {
            switch self {
            case .given(let id): return .string(id)
            case .result(let index): return ["$result": .int(Int64(index))]
            }
        }
    }

    /// A create, update or delete: alone or in a batch. Values may hold `{"$result": n}`.
    struct Op {
        enum Kind {
            case create(id: String?, data: JSONObject)
            case update(id: ObjectID, patch: JSONObject?, ops: [ModelData.FieldOp]?, ifVersion: Int64?)
            case delete(id: ObjectID, ifVersion: Int64?)
        }

        var collection: String
        var kind: Kind

        var name: String {
            switch kind {
            case .create: return "create"
            case .update: return "update"
            case .delete: return "delete"
            }
        }

        /// The op's fields as sent (in a batch element, with its `op`).
        var json: JSONObject {
            var object: JSONObject = ["op": .string(name), "collection": .string(collection)]
            switch kind {
            case .create(let id, let data):
                if let id { object["id"] = .string(id) }
                object["data"] = .object(data)
            case .update(let id, let patch, let ops, let ifVersion):
                object["id"] = id.json
                if let patch { object["patch"] = .object(patch) }
                if let ops { object["ops"] = ModelData.FieldOp.json(ops) }
                if let ifVersion { object["ifVersion"] = .int(ifVersion) }
            case .delete(let id, let ifVersion):
                object["id"] = id.json
                if let ifVersion { object["ifVersion"] = .int(ifVersion) }
            }
            return object
        }

        /// What makes two ops the same request: the fields as sent, an update's missing patch as
        /// an empty one, key order aside.
        var identity: JSON {
            var object = json
            if case .update(_, nil, _, _) = kind { object["patch"] = .object(JSONObject()) }
            return JSON.object(object).canonical
        }
    }

    enum Command {
        case object(Op)
        /// `atomic` nil: not sent (atomic by default).
        case batch([Op], atomic: Bool?)
        case defineSchema(ModelSchema)
        case dropSchema(String)
    }

    var command: Command
    var requestKey: String?

    /// The request line, without a tag.
    var request: JSON {
        var object: JSONObject
        switch command {
        case .object(let op):
            object = op.json
        case .batch(let ops, let atomic):
            object = ["op": "batch", "ops": .array(ops.map { .object($0.json) })]
            if let atomic { object["atomic"] = .bool(atomic) }
        case .defineSchema(let schema):
            object = ["op": "schema.define", "collection": .string(schema.collection), "fields": schema.fieldsJSON]
        case .dropSchema(let collection):
            object = ["op": "schema.drop", "collection": .string(collection)]
        }
        if let requestKey { object["requestKey"] = .string(requestKey) }
        return .object(object)
    }

    /// What a retry must repeat to be the same request (the request key's digest covers it).
    var identity: JSON {
        switch command {
        case .object(let op): return op.identity
        case .batch(let ops, let atomic):
            return JSON.object(["op": "batch", "ops": .array(ops.map(\.identity)), "atomic": .bool(atomic ?? true)])
                .canonical
        case .defineSchema, .dropSchema:
            guard case .object(var object) = request else { return request }
            object["requestKey"] = nil
            return JSON.object(object).canonical
        }
    }

    var ops: [Op] {
        switch command {
        case .object(let op): return [op]
        case .batch(let ops, _): return ops
        case .defineSchema, .dropSchema: return []
        }
    }

    /// Every `n` of the `{"$result": n}` objects in a value.
    static func resultIndices(in value: JSON) -> [Int] {
        switch value {
        case .array(let elements): return elements.flatMap(resultIndices)
        case .object(let object):
            if object.count == 1, case .int(let index)? = object["$result"] { return [Int(index)] }
            return object.fields.flatMap { resultIndices(in: $0.value) }
        default: return []
        }
    }
}

extension JSON {
    /// The same value with the fields of every object (but typed values) in a shuffled order: the
    /// same request spelled differently.
    func respelled(using random: inout some RandomNumberGenerator) -> JSON {
        switch self {
        case .array(let elements): return .array(elements.map { $0.respelled(using: &random) })
        case .object(let object) where object.count > 1:
            return .object(
                JSONObject(
                    object.fields.shuffled(using: &random).map {
                        JSONObject.Field(key: $0.key, value: $0.value.respelled(using: &random))
                    }))
        case .object(let object):
            return .object(
                JSONObject(
                    object.fields.map { JSONObject.Field(key: $0.key, value: $0.value.respelled(using: &random)) }))
        default: return self
        }
    }
}
