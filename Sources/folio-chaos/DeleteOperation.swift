import FolioJSON

/// `delete`, with or without `ifVersion`.
struct DeleteOperation: WorkloadOperation {
    let key: ObjectKey
    let ifVersion: Int64?

    var request: JSON {
        var fields: [JSONObject.Field] = [
            .init(key: "op", value: "delete"), .init(key: "collection", value: .string(key.collection)),
            .init(key: "id", value: .string(key.id)),
        ]
        if let ifVersion { fields.append(.init(key: "ifVersion", value: .int(ifVersion))) }
        return .object(JSONObject(fields))
    }

    var kind: String { ifVersion == nil ? "delete" : "delete ifVersion" }

    var label: String { "delete \(key)" + (ifVersion.map { " ifVersion \($0)" } ?? "") }

    func transition(_ prior: ObjectState) -> Possibilities<ObjectState>.Transition {
        guard prior.isPresent else { return .refused(code: "not_found") }
        if let ifVersion, ifVersion != prior.version { return .refused(code: "conflict") }
        return .applied(ObjectState(version: prior.version + 1, data: nil))
    }

    func record(_ outcome: Outcome.Kind, in ledger: ClientLedger) throws(Violation) {
        switch outcome {
        case .acknowledged(let result):
            guard result["id"]?.stringValue == key.id, let version = result["version"]?.integerValue else {
                throw Violation("\(label): malformed result \(JSON.object(result))")
            }
            try ledger.objects[key]!.acknowledge(ObjectState(version: version, data: nil), by: transition, label)
        case .refused(let code, let error):
            let current = error["currentVersion"]?.integerValue
            try ledger.objects[key]!.refuse(
                code: code, byConstraint: false, fits: { current == nil || $0.version == current }, by: transition,
                label)
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
                event.type == "deleted" && (version == nil || event.version == version)
            }
        ]
    }
}
