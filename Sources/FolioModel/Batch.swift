import FolioJSON

/// One write of a `batch`, as decoded: a create, update or delete whose values may still hold
/// `{"$result": n}`, the object written by op n of the same batch, and whose id may be one.
public struct BatchOperation: Sendable {
    public static let maxOperations = 1000

    /// The op, with `{"$result"}` values in place; an update's or delete's id is empty when
    /// `idResult` names the op whose object it is.
    public var command: Command
    public var idResult: Int?
    /// Whether `{"$result"}` values appear in the op's data, patch or ops.
    public var hasResultValues: Bool

    public init(command: Command, idResult: Int?, hasResultValues: Bool) {
        self.command = command
        self.idResult = idResult
        self.hasResultValues = hasResultValues
    }

    /// `{"$result": n}`: the reference to op n's object.
    public static func resultIndex(of object: JSONObject) -> Int? {
        guard object.count == 1, let field = object.fields.first, field.key == "$result",
            case .int(let index) = field.value, index >= 0,
            index < maxOperations
        else { return nil }
        return Int(index)
    }

    /// The op with every `{"$result": n}` replaced: by `{"$ref": "<collection>/<id>"}` in values,
    /// by the id where the id was one. `results[n]` is op n's object, nil if op n failed.
    public func resolved(_ results: [(collection: String, id: String)?]) throws(ValidationError) -> Command {
        func target(_ index: Int) throws(ValidationError) -> (collection: String, id: String) {
            guard index < results.count else {
                throw ValidationError("{\"$result\": \(index)} names op \(index), which does not come before this one")
            }
            guard let result = results[index] else {
                throw ValidationError("{\"$result\": \(index)} names op \(index), which failed")
            }
            return result
        }
        func resolve(_ value: JSON) throws(ValidationError) -> JSON {
            switch value {
            case .array(let elements):
                var resolved: [JSON] = []
                resolved.reserveCapacity(elements.count)
                for element in elements { resolved.append(try resolve(element)) }
                return .array(resolved)
            case .object(let object):
                if let index = Self.resultIndex(of: object) {
                    let (collection, id) = try target(index)
                    return ["$ref": .string(collection + "/" + id)]
                }
                return .object(try resolveObject(object))
            default:
                return value
            }
        }
        func resolveObject(_ object: JSONObject) throws(ValidationError) -> JSONObject {
            var fields: [JSONObject.Field] = []
            fields.reserveCapacity(object.count)
            for field in object { fields.append(JSONObject.Field(key: field.key, value: try resolve(field.value))) }
            return JSONObject(fields)
        }
        func resolveID(_ collection: String, _ id: String) throws(ValidationError) -> String {
            guard let idResult else { return id }
            let result = try target(idResult)
            guard result.collection == collection else {
                throw ValidationError(
                    "{\"$result\": \(idResult)} is an object of \(result.collection), not of \(collection)")
            }
            return result.id
        }
        switch command {
        case .create(let collection, let id, let data):
            return .create(collection: collection, id: id, data: hasResultValues ? try resolveObject(data) : data)
        case .update(let collection, let id, let patch, let ops, let ifVersion):
            var resolvedOps = ops
            if hasResultValues, let ops {
                var entries: [FieldOperations.Entry] = []
                for entry in ops.entries {
                    var resolvedEntry = entry
                    switch entry.operation {
                    case .push(let values): resolvedEntry.operation = .push(try values.map(resolve))
                    case .addToSet(let values): resolvedEntry.operation = .addToSet(try values.map(resolve))
                    case .pull(let values): resolvedEntry.operation = .pull(try values.map(resolve))
                    case .set(let value): resolvedEntry.operation = .set(try resolve(value))
                    case .increment, .unset: break
                    }
                    entries.append(resolvedEntry)
                }
                resolvedOps = FieldOperations(entries)
            }
            return .update(
                collection: collection, id: try resolveID(collection, id),
                patch: hasResultValues ? try resolveObject(patch) : patch,
                ops: resolvedOps, ifVersion: ifVersion)
        case .delete(let collection, let id, let ifVersion):
            return .delete(collection: collection, id: try resolveID(collection, id), ifVersion: ifVersion)
        default:
            return command
        }
    }

    /// The op as canonical JSON, placeholders included.
    public var canonicalJSON: JSON {
        guard case .object(var object) = command.canonicalJSON else { return command.canonicalJSON }
        if let idResult { object["id"] = ["$result": .int(Int64(idResult))] }
        return JSON.object(object).canonical
    }
}
