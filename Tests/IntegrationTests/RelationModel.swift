import FolioJSON

/// A simple in-memory model of foliod's data model for relations: objects by collection and id
/// with their versions, schemas with delete rules and owning fields, request keys. It predicts
/// what a write answers and which events it appends, from the protocol's description of issue 10.
final class RelationModel {
    typealias Key = ModelData.Key

    struct Object: Equatable {
        var version: Int64
        var data: JSONObject
    }

    struct State {
        var objects: [Key: Object] = [:]
        /// The last version each key had, deleted ones included: a new object continues from it.
        var lastVersion: [Key: Int64] = [:]
        var schemas: [String: ModelSchema] = [:]
    }

    /// An event a write must append, in order. `cause` is the index, among the write's events, of
    /// the event whose delete rule made this one.
    struct Event {
        enum Change {
            case created(JSONObject)
            case updated(patch: JSONObject, ops: JSON?)
            case deleted
            case schemaDefined(ModelSchema)
            case schemaDropped(String)
        }

        var change: Change
        var key: Key?
        var version: Int64
        var cause: Int?

        var type: String {
            switch change {
            case .created: return "created"
            case .updated: return "updated"
            case .deleted: return "deleted"
            case .schemaDefined: return "schema.defined"
            case .schemaDropped: return "schema.dropped"
            }
        }
    }

    indirect enum Result {
        case object(Key, Object)
        case deleted(Key, version: Int64)
        case batch([Swift.Result<Result, ModelFailure>])
        case schema(ModelSchema)
        case schemaDropped(String)
    }

    enum Prediction {
        case refused(ModelFailure)
        /// The request key's first answer again (plus `replayed`): nothing written.
        case replay(JSON)
        /// `state`: the model once the write is done.
        case accepted(Result, [Event], state: State)
    }

    private(set) var state = State()
    /// Requests whose key foliod remembers (those that wrote something): what they asked and
    /// the result foliod gave.
    private(set) var recorded: [String: (identity: JSON, result: JSON)] = [:]

    static let deniedReferrersShown = 10

    var objects: [Key: Object] { state.objects }
    var schemas: [String: ModelSchema] { state.schemas }

    func keys(in collection: String) -> [Key] {
        state.objects.keys.filter { $0.collection == collection }.sorted { ModelData.precedes($0.id, $1.id) }
    }

    /// `generatedID(n)`: the id foliod chose for op n (a create without id), read from its answer.
    func predict(_ write: ModelWrite, generatedID: @escaping (Int) -> String) -> Prediction {
        if let problem = Self.decodingProblem(write) { return .refused(problem) }
        if let key = write.requestKey, let first = recorded[key] {
            guard first.identity == write.identity else {
                return .refused(
                    ModelFailure(
                        .conflict, "request key \(key) was used for another request",
                        details: ["requestKey": .string(key)]))
            }
            return .replay(first.result)
        }
        var execution = Execution(state: state, generatedID: generatedID)
        do throws(ModelFailure) {
            let result = try execution.execute(write.command)
            return .accepted(result, execution.events, state: execution.state)
        } catch {
            return .refused(error)
        }
    }

    /// Takes the prediction as what happened (foliod agreed); `result` is foliod's answer, which a
    /// retry with the same key must get again.
    func commit(_ write: ModelWrite, _ prediction: Prediction, result: JSON?) {
        guard case .accepted(_, let events, let next) = prediction else { return }
        state = next
        if let key = write.requestKey, !events.isEmpty, let result { recorded[key] = (write.identity, result) }
    }

    /// What foliod refuses when decoding, before anything else: malformed field operations,
    /// `{"$result": n}` naming an op that does not come earlier.
    static func decodingProblem(_ write: ModelWrite) -> ModelFailure? {
        let inBatch: Bool
        if case .batch = write.command { inBatch = true } else { inBatch = false }
        for (index, op) in write.ops.enumerated() {
            var problem: String?
            var values: [JSON] = []
            switch op.kind {
            case .create(_, let data):
                values = [.object(data)]
            case .update(let id, let patch, let ops, _):
                if case .result(let n) = id, n >= index { problem = "id names op \(n)" }
                if let ops { problem = problem ?? ModelData.problem(ops: ops, patch: patch) }
                values = (patch.map { [JSON.object($0)] } ?? []) + (ops ?? []).map(\.operand)
            case .delete(let id, _):
                if case .result(let n) = id, n >= index { problem = "id names op \(n)" }
            }
            if let n = values.flatMap(ModelWrite.resultIndices).first(where: { $0 >= index }) {
                problem = problem ?? "a value names op \(n)"
            }
            if let problem {
                return ModelFailure(
                    .badRequest, "ops[\(index)]: \(problem)", details: inBatch ? ["index": .int(Int64(index))] : [:])
            }
        }
        return nil
    }

    /// A write being carried out on a copy of the state.
    private struct Execution {
        var state: State
        let generatedID: (Int) -> String
        var events: [Event] = []

        init(state: State, generatedID: @escaping (Int) -> String) {
            self.state = state
            self.generatedID = generatedID
        }

        mutating func execute(_ command: ModelWrite.Command) throws(ModelFailure) -> Result {
            switch command {
            case .object(let op):
                return try run(op, index: 0, results: []).result
            case .batch(let ops, let atomic):
                var results: [Key?] = []
                var items: [Swift.Result<Result, ModelFailure>] = []
                for (index, op) in ops.enumerated() {
                    if atomic ?? true {
                        do {
                            let (result, key) = try run(op, index: index, results: results)
                            results.append(key)
                            items.append(.success(result))
                        } catch {
                            var details = error.details
                            details["index"] = .int(Int64(index))
                            throw ModelFailure(error.code, "op \(index): \(error.message)", details: details)
                        }
                    } else {
                        var attempt = self
                        do {
                            let (result, key) = try attempt.run(op, index: index, results: results)
                            self = attempt
                            results.append(key)
                            items.append(.success(result))
                        } catch {
                            results.append(nil)
                            items.append(.failure(error))
                        }
                    }
                }
                return .batch(items)
            case .defineSchema(let schema):
                let violating = state.objects.filter {
                    $0.key.collection == schema.collection && schema.violation($0.value.data) != nil
                }
                .keys.map(\.id).sorted(by: ModelData.precedes)
                guard violating.isEmpty else {
                    throw ModelFailure(
                        .badRequest, "\(violating.count) objects of \(schema.collection) do not fit",
                        details: [
                            "violationCount": .int(Int64(violating.count)),
                            "violations": .array(violating.prefix(20).map { .string($0) }),
                        ])
                }
                state.schemas[schema.collection] = schema
                events.append(Event(change: .schemaDefined(schema), key: nil, version: 0, cause: nil))
                return .schema(schema)
            case .dropSchema(let collection):
                guard state.schemas[collection] != nil else {
                    throw ModelFailure(.notFound, "no schema of \(collection)")
                }
                state.schemas[collection] = nil
                events.append(Event(change: .schemaDropped(collection), key: nil, version: 0, cause: nil))
                return .schemaDropped(collection)
            }
        }

        /// Appends an event and applies it; returns its index among the write's events.
        @discardableResult
        private mutating func emit(_ change: Event.Change, _ key: Key, cause: Int?) -> Int {
            let version = (state.lastVersion[key] ?? 0) + 1
            state.lastVersion[key] = version
            switch change {
            case .created(let data): state.objects[key] = Object(version: version, data: data)
            case .updated: break
            case .deleted: state.objects[key] = nil
            case .schemaDefined, .schemaDropped: break
            }
            events.append(Event(change: change, key: key, version: version, cause: cause))
            return events.count - 1
        }

        private mutating func update(_ key: Key, to data: JSONObject, patch: JSONObject, ops: JSON?, cause: Int?) -> Int
        {
            let index = emit(.updated(patch: patch, ops: ops), key, cause: cause)
            state.objects[key] = Object(version: state.lastVersion[key]!, data: data)
            return index
        }

        // MARK: An op of the write

        /// Op `index` of the write; `results[n]` is the object of op n (nil if it failed).
        mutating func run(_ op: ModelWrite.Op, index: Int, results: [Key?]) throws(ModelFailure) -> (
            result: Result, key: Key
        ) {
            func target(_ n: Int) throws(ModelFailure) -> Key {
                guard n < results.count, let key = results[n] else {
                    throw ModelFailure(.badRequest, "$result \(n) names an op that failed")
                }
                return key
            }
            func resolve(_ value: JSON) throws(ModelFailure) -> JSON {
                switch value {
                case .array(let elements):
                    var resolved: [JSON] = []
                    for element in elements { resolved.append(try resolve(element)) }
                    return .array(resolved)
                case .object(let object):
                    if object.count == 1, case .int(let n)? = object["$result"] { return try target(Int(n)).refJSON }
                    var fields: [JSONObject.Field] = []
                    for field in object {
                        fields.append(JSONObject.Field(key: field.key, value: try resolve(field.value)))
                    }
                    return .object(JSONObject(fields))
                default:
                    return value
                }
            }
            func resolveObject(_ object: JSONObject) throws(ModelFailure) -> JSONObject {
                guard case .object(let resolved) = try resolve(.object(object)) else { return object }
                return resolved
            }
            func resolveID(_ id: ModelWrite.ObjectID) throws(ModelFailure) -> Key {
                switch id {
                case .given(let id): return Key(op.collection, id)
                case .result(let n):
                    let key = try target(n)
                    guard key.collection == op.collection else {
                        throw ModelFailure(.badRequest, "$result \(n) is an object of \(key.collection)")
                    }
                    return key
                }
            }
            let schema = state.schemas[op.collection]
            switch op.kind {
            case .create(let id, let given):
                let data = try resolveObject(given)
                let key = Key(op.collection, id ?? generatedID(index))
                if state.objects[key] != nil { throw ModelFailure(.conflict, "\(key) exists") }
                if let why = schema?.violation(data) { throw ModelFailure(.badRequest, why) }
                emit(.created(data), key, cause: nil)
                return (.object(key, state.objects[key]!), key)

            case .update(let id, let givenPatch, let givenOps, let ifVersion):
                var ops: [ModelData.FieldOp]?
                if let givenOps {
                    var resolved: [ModelData.FieldOp] = []
                    for var op in givenOps {
                        op.operand = try resolve(op.operand)
                        resolved.append(op)
                    }
                    ops = resolved
                }
                let key = try resolveID(id)
                let patch = try resolveObject(givenPatch ?? JSONObject())
                guard let old = state.objects[key] else { throw ModelFailure(.notFound, "\(key) not found") }
                if let ifVersion, ifVersion != old.version {
                    throw ModelFailure(
                        .conflict, "\(key) is at version \(old.version)",
                        details: ["expectedVersion": .int(ifVersion), "currentVersion": .int(old.version)])
                }
                var data = ModelData.mergePatch(patch, into: old.data)
                if let ops {
                    switch ModelData.apply(ops, to: data) {
                    case .success(let changed): data = changed
                    case .failure(let failure): throw failure
                    }
                }
                if let why = schema?.violation(data) { throw ModelFailure(.badRequest, why) }
                let own = update(key, to: data, patch: patch, ops: ops.map(ModelData.FieldOp.json), cause: nil)
                let result = Result.object(key, state.objects[key]!)
                if let schema, schema.hasOwningFields {
                    let owned = { (data: JSONObject) in
                        Set(
                            ModelData.references(in: data).filter { schema.referenceField(at: $0.path)?.owns == true }
                                .map(\.target))
                    }
                    let released = owned(old.data).subtracting(owned(data)).sorted(by: ModelData.precedes)
                    try applyRules(released.compactMap(Key.init(ref:)).map { .release($0, cause: own) })
                }
                return (result, key)

            case .delete(let id, let ifVersion):
                let key = try resolveID(id)
                guard let old = state.objects[key] else { throw ModelFailure(.notFound, "\(key) not found") }
                if let ifVersion, ifVersion != old.version {
                    throw ModelFailure(
                        .conflict, "\(key) is at version \(old.version)",
                        details: ["expectedVersion": .int(ifVersion), "currentVersion": .int(old.version)])
                }
                let own = emit(.deleted, key, cause: nil)
                var pending: [Consequence] = []
                try consequences(ofDeleting: key, old.data, cause: own, into: &pending)
                try applyRules(pending)
                return (.deleted(key, version: state.lastVersion[key]!), key)
            }
        }

        // MARK: Delete rules

        private enum Consequence {
            case delete(Key, cause: Int)
            /// Take the reference to `target` out of the object's `field`.
            case nullify(Key, field: String, target: Key, cause: Int)
            /// Delete the object unless an owning reference to it is left.
            case release(Key, cause: Int)
        }

        /// The objects referring to `target`, by (collection, field path) in byte order, each
        /// group's ids in byte order.
        private func referrers(of target: Key) -> [(collection: String, path: String, ids: [String])] {
            var groups: [String: (collection: String, path: String, ids: [String])] = [:]
            for (key, object) in state.objects {
                for reference in ModelData.references(in: object.data) where reference.target == target.ref {
                    groups[key.collection + "\u{0}" + reference.path, default: (key.collection, reference.path, [])].ids
                        .append(key.id)
                }
            }
            return groups.sorted { ModelData.precedes($0.key, $1.key) }.map {
                ($0.value.collection, $0.value.path, $0.value.ids.sorted(by: ModelData.precedes))
            }
        }

        private func isOwned(_ key: Key) -> Bool {
            referrers(of: key).contains { state.schemas[$0.collection]?.referenceField(at: $0.path)?.owns == true }
        }

        /// What deleting `key` (whose data was `data`) makes happen, after it is gone: the rules of
        /// the fields that refer to it, then the release of what it owned. A deny refuses it all.
        private func consequences(
            ofDeleting key: Key, _ data: JSONObject, cause: Int, into pending: inout [Consequence]
        ) throws(ModelFailure) {
            var denied: [String] = []
            for group in referrers(of: key) {
                guard let field = state.schemas[group.collection]?.referenceField(at: group.path) else { continue }
                switch field.rule {
                case .keep: continue
                case .deny:
                    denied += group.ids.prefix(deniedReferrersShown - denied.count).map { group.collection + "/" + $0 }
                case .nullify:
                    pending += group.ids.map {
                        .nullify(Key(group.collection, $0), field: group.path, target: key, cause: cause)
                    }
                case .cascade: pending += group.ids.map { .delete(Key(group.collection, $0), cause: cause) }
                }
                if denied.count >= deniedReferrersShown { break }
            }
            guard denied.isEmpty else {
                throw ModelFailure(
                    .conflict, "cannot delete \(key): \(denied) deny it",
                    details: ["referrers": .array(denied.map { .string($0) })])
            }
            guard let schema = state.schemas[key.collection], schema.hasOwningFields else { return }
            for reference in ModelData.references(in: data)
            where schema.referenceField(at: reference.path)?.owns == true {
                if let target = Key(ref: reference.target) { pending.append(.release(target, cause: cause)) }
            }
        }

        /// Carries out consequences in order, appending those they make (transitively).
        private mutating func applyRules(_ initial: [Consequence]) throws(ModelFailure) {
            var pending = initial
            var next = 0
            while next < pending.count {
                let consequence = pending[next]
                next += 1
                switch consequence {
                case .delete(let key, let cause):
                    guard let old = state.objects[key] else { continue }
                    let index = emit(.deleted, key, cause: cause)
                    try consequences(ofDeleting: key, old.data, cause: index, into: &pending)
                case .nullify(let key, let field, let target, let cause):
                    guard let old = state.objects[key] else { continue }
                    let op: ModelData.FieldOp
                    switch old.data[field] {
                    case .array(let elements)? where elements.contains(where: { ModelData.same($0, target.refJSON) }):
                        op = ModelData.FieldOp(path: [field], name: "$pull", operand: [target.refJSON])
                    case let value? where ModelData.same(value, target.refJSON):
                        op = ModelData.FieldOp(path: [field], name: "$set", operand: .null)
                    default:
                        continue
                    }
                    guard case .success(let data) = ModelData.apply([op], to: old.data) else { continue }
                    if let why = state.schemas[key.collection]?.violation(data) {
                        throw ModelFailure(.badRequest, "nullifying \(field) of \(key): \(why)")
                    }
                    update(key, to: data, patch: JSONObject(), ops: ModelData.FieldOp.json([op]), cause: cause)
                case .release(let key, let cause):
                    guard state.objects[key] != nil, !isOwned(key) else { continue }
                    pending.append(.delete(key, cause: cause))
                }
            }
        }
    }
}
