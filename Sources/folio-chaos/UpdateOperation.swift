import FolioJSON

/// `update` with a merge patch and, now and then, field operations after it; with or without
/// `ifVersion`.
struct UpdateOperation: WorkloadOperation {
    let key: ObjectKey
    /// The patch, whose `w` field is the write's nonce.
    let patch: JSONObject
    /// Field operations on paths the patch leaves alone (`$inc` of `n`, `$push` to `tags`, ...).
    let ops: JSONObject?
    let ifVersion: Int64?
    let nonce: String

    init(key: ObjectKey, patch: JSONObject, ops: JSONObject? = nil, ifVersion: Int64?, nonce: String) {
        self.key = key
        self.patch = patch
        self.ops = ops
        self.ifVersion = ifVersion
        self.nonce = nonce
    }

    var kind: String { ops == nil ? "update" : "update with ops" }

    var request: JSON {
        var fields: [JSONObject.Field] = [
            .init(key: "op", value: "update"), .init(key: "collection", value: .string(key.collection)),
            .init(key: "id", value: .string(key.id)), .init(key: "patch", value: .object(patch)),
        ]
        if let ops { fields.append(.init(key: "ops", value: .object(ops))) }
        if let ifVersion { fields.append(.init(key: "ifVersion", value: .int(ifVersion))) }
        return .object(JSONObject(fields))
    }

    var label: String { "update \(key)" + (ifVersion.map { " ifVersion \($0)" } ?? "") + " [\(nonce)]" }

    func transition(_ prior: ObjectState) -> Possibilities<ObjectState>.Transition {
        guard let data = prior.data else { return .refused(code: "not_found") }
        if let ifVersion, ifVersion != prior.version { return .refused(code: "conflict") }
        let patched = MergePatch.apply(patch, to: data)
        // The workload's ops always apply (numbers to $inc, arrays to push to); bad_request otherwise.
        guard let updated = ops.map({ FieldOps.apply($0, to: patched) }) ?? patched else {
            return .refused(code: "bad_request")
        }
        return .applied(ObjectState(version: prior.version + 1, data: updated))
    }

    func record(_ outcome: Outcome.Kind, in ledger: ClientLedger) throws(Violation) {
        switch outcome {
        case .acknowledged(let result):
            guard result["id"]?.stringValue == key.id else {
                throw Violation("\(label): the result is another object: \(JSON.object(result))")
            }
            try ledger.objects[key]!.acknowledge(ObjectState(object: result), by: transition, label)
        case .refused(let code, let error):
            let current = error["currentVersion"]?.integerValue
            try ledger.objects[key]!.refuse(
                code: code, byConstraint: error["view"] != nil, fits: { current == nil || $0.version == current },
                by: transition, label)
        case .notStored:
            return
        case .uncertain:
            ledger.objects[key]!.widen(by: transition)
        }
    }

    func expectedEvents(_ outcome: Outcome.Kind, in log: LoggedState) -> [ExpectedEvent] {
        var version: Int64?
        switch outcome {
        case .refused, .notStored: return []
        case .acknowledged(let result): version = result["version"]?.integerValue
        case .uncertain: break
        }
        return [
            ExpectedEvent(subject: .object(key), write: label) { event in
                event.type == "updated" && event.nonce == nonce && event.patch == patch && event.ops == ops
                    && (version == nil || event.version == version)
            }
        ]
    }
}
