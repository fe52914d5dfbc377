import FolioJSON

/// `view.define`, unique or not.
struct ViewDefineOperation: WorkloadOperation {
    let definition: ViewDefinition

    var request: JSON { .object(JSONObject([.init(key: "op", value: "view.define")] + definition.requestFields)) }

    var kind: String { "view.define" }

    var label: String { "view.define \(definition)" }

    func transition(_ prior: ViewState) -> Possibilities<ViewState>.Transition {
        prior == .absent ? .applied(.defined(definition)) : .refused(code: "conflict")
    }

    func record(_ outcome: Outcome.Kind, in ledger: ClientLedger) throws(Violation) {
        switch outcome {
        case .acknowledged(let result):
            guard let answered = ViewDefinition(result), result["count"]?.integerValue != nil else {
                throw Violation("\(label): malformed result \(JSON.object(result))")
            }
            try ledger.views[definition.name]!.acknowledge(.defined(answered), by: transition, label)
        case .refused(let code, let error):
            // A unique view over data with duplicates is refused with the groups of ids.
            try ledger.views[definition.name]!.refuse(
                code: code, byConstraint: error["duplicates"] != nil, by: transition, label)
        case .notStored:
            return
        case .uncertain:
            ledger.views[definition.name]!.widen(by: transition)
        }
    }

    func expectedEvents(_ outcome: Outcome.Kind, in log: LoggedState) -> [ExpectedEvent] {
        switch outcome {
        case .refused, .notStored: return []
        case .acknowledged, .uncertain: break
        }
        return [
            ExpectedEvent(subject: .view(definition.name), write: label) {
                $0.type == "view.defined" && $0.view == definition
            }
        ]
    }
}
