import FolioJSON

/// `create`, with an id the client chose or (`key` nil) one foliod chooses.
struct CreateOperation: WorkloadOperation {
    let collection: String
    /// The client's id; nil to let foliod choose.
    let id: String?
    /// The data, whose `w` field is the write's nonce.
    let data: JSONObject
    let nonce: String

    var request: JSON {
        var fields: [JSONObject.Field] = [
            .init(key: "op", value: "create"), .init(key: "collection", value: .string(collection)),
        ]
        if let id { fields.append(.init(key: "id", value: .string(id))) }
        fields.append(.init(key: "data", value: .object(data)))
        return .object(JSONObject(fields))
    }

    var kind: String { "create" }

    var label: String { "create \(collection)/\(id ?? "(foliod's id)") [\(nonce)]" }

    func transition(_ prior: ObjectState) -> Possibilities<ObjectState>.Transition {
        prior.isPresent ? .refused(code: "conflict") : .applied(ObjectState(version: prior.version + 1, data: data))
    }

    func record(_ outcome: Outcome.Kind, in ledger: ClientLedger) throws(Violation) {
        switch outcome {
        case .acknowledged(let result):
            guard let answeredID = result["id"]?.stringValue, result["collection"]?.stringValue == collection else {
                throw Violation("\(label): the result names no object of \(collection): \(JSON.object(result))")
            }
            if let id, answeredID != id { throw Violation("\(label): acknowledged as \(collection)/\(answeredID)") }
            let key = ObjectKey(collection: collection, id: answeredID)
            if id == nil {
                guard ledger.objects[key] == nil else {
                    throw Violation("\(label): foliod chose the id \(answeredID) a second time")
                }
                ledger.track(key)
            }
            try ledger.objects[key]!.acknowledge(ObjectState(object: result), by: transition, label)
        case .refused(let code, let error):
            // Without an id, only a unique view can refuse a create.
            guard let id else {
                guard code == "conflict", error["view"] != nil else {
                    throw Violation("\(label): refused with \(JSON.object(error))")
                }
                return
            }
            try ledger.objects[ObjectKey(collection: collection, id: id)]!.refuse(
                code: code, byConstraint: error["view"] != nil, by: transition, label)
        case .notStored:
            // Nothing changed: nothing to learn or check here (the restart finds no event of it).
            return
        case .uncertain:
            if let id {
                ledger.objects[ObjectKey(collection: collection, id: id)]!.widen(by: transition)
            } else {
                ledger.pendingCreates[nonce] = collection
            }
        }
    }

    func expectedEvents(_ outcome: Outcome.Kind, in log: LoggedState) -> [ExpectedEvent] {
        let key: ObjectKey
        var version: Int64?
        switch outcome {
        case .refused, .notStored: return []
        case .acknowledged(let result):
            key = ObjectKey(collection: collection, id: result["id"]?.stringValue ?? "")
            version = result["version"]?.integerValue
        case .uncertain:
            if let id {
                key = ObjectKey(collection: collection, id: id)
            } else {
                guard let found = log.eventsByNonce[nonce]?.key else { return [] }
                key = found
            }
        }
        return [
            ExpectedEvent(subject: .object(key), write: label) { event in
                event.type == "created" && event.nonce == nonce && event.data == data
                    && (version == nil || event.version == version)
            }
        ]
    }
}
