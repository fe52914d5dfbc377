import FolioJSON

/// One create, update or delete of a model write: a request of its own, or an op of a batch. Values
/// may hold `{"$result": n}`, and an update's or delete's id may be one, naming the object of an
/// earlier op n of the batch (always one whose id the client chose, so the model knows it).
struct ModelCommand {
    enum Action {
        /// `data` with the nonce in `w`.
        case create(data: JSONObject)
        /// `patch` with the nonce in `w`; `ops` after it.
        case update(patch: JSONObject, ops: JSONObject?, ifVersion: Int64?)
        case delete(ifVersion: Int64?)
    }

    let collection: String
    /// The object, or nil for a create whose id foliod chooses.
    let key: ObjectKey?
    /// The id is sent as `{"$result": n}` (the op n that wrote `key`).
    let idResult: Int?
    let action: Action
    /// The `w` of the data or patch; nil for a delete.
    let nonce: String?

    /// The op's fields, without a tag or request key.
    var wire: JSONObject {
        var fields: [JSONObject.Field] = [
            .init(key: "op", value: .string(opName)), .init(key: "collection", value: .string(collection)),
        ]
        if let idResult {
            fields.append(.init(key: "id", value: ["$result": .int(Int64(idResult))]))
        } else if let key {
            fields.append(.init(key: "id", value: .string(key.id)))
        }
        switch action {
        case .create(let data):
            fields.append(.init(key: "data", value: .object(data)))
        case .update(let patch, let ops, let ifVersion):
            fields.append(.init(key: "patch", value: .object(patch)))
            if let ops { fields.append(.init(key: "ops", value: .object(ops))) }
            if let ifVersion { fields.append(.init(key: "ifVersion", value: .int(ifVersion))) }
        case .delete(let ifVersion):
            if let ifVersion { fields.append(.init(key: "ifVersion", value: .int(ifVersion))) }
        }
        return JSONObject(fields)
    }

    var opName: String {
        switch action {
        case .create: return "create"
        case .update: return "update"
        case .delete: return "delete"
        }
    }

    var label: String {
        var text = "\(opName) \(key?.description ?? "\(collection)/(foliod's id)")"
        if let idResult { text += " (as $result \(idResult))" }
        switch action {
        case .update(_, _, let ifVersion?), .delete(let ifVersion?): text += " ifVersion \(ifVersion)"
        default: break
        }
        return text + (nonce.map { " [\($0)]" } ?? "")
    }

    /// The earlier ops the command names with `{"$result": n}`, in its id or its values.
    var namedResults: [Int] {
        var found: [Int] = idResult.map { [$0] } ?? []
        func collect(_ value: JSON) {
            switch value {
            case .array(let elements): elements.forEach(collect)
            case .object(let object):
                if let index = Self.resultIndex(object) {
                    found.append(index)
                } else {
                    object.forEach { collect($0.value) }
                }
            default: break
            }
        }
        switch action {
        case .create(let data): collect(.object(data))
        case .update(let patch, let ops, _):
            collect(.object(patch))
            if let ops { collect(.object(ops)) }
        case .delete: break
        }
        return found
    }

    /// `n` of a `{"$result": n}` object.
    static func resultIndex(_ object: JSONObject) -> Int? {
        guard object.count == 1, case .int(let index)? = object["$result"] else { return nil }
        return Int(index)
    }

    /// `value` with each `{"$result": n}` replaced by `{"$ref"}` to `results[n]`'s object.
    static func resolve(_ value: JSON, _ results: [ObjectKey?]) -> JSON {
        switch value {
        case .array(let elements): return .array(elements.map { resolve($0, results) })
        case .object(let object):
            if let index = resultIndex(object), index < results.count, let key = results[index] {
                return RuleSchemas.reference(key)
            }
            return .object(resolve(object, results))
        default: return value
        }
    }

    static func resolve(_ object: JSONObject, _ results: [ObjectKey?]) -> JSONObject {
        JSONObject(object.fields.map { .init(key: $0.key, value: resolve($0.value, results)) })
    }
}
