import FolioJSON

/// `view.drop`.
struct ViewDropOperation: WorkloadOperation {
    let name: String

    var request: JSON { ["op": "view.drop", "name": .string(name)] }

    var kind: String { "view.drop" }

    var label: String { "view.drop \(name)" }

    func transition(_ prior: ViewState) -> Possibilities<ViewState>.Transition {
        prior == .absent ? .refused(code: "not_found") : .applied(.absent)
    }

    func record(_ outcome: Outcome.Kind, in ledger: ClientLedger) throws(Violation) {
        switch outcome {
        case .acknowledged(let result):
            guard result["name"]?.stringValue == name, result["dropped"] == .bool(true) else {
                throw Violation("\(label): malformed result \(JSON.object(result))")
            }
            try ledger.views[name]!.acknowledge(.absent, by: transition, label)
        case .refused(let code, _):
            try ledger.views[name]!.refuse(code: code, byConstraint: false, by: transition, label)
        case .notStored:
            return
        case .uncertain:
            ledger.views[name]!.widen(by: transition)
        }
    }

    func expectedEvents(_ outcome: Outcome.Kind, in log: LoggedState) -> [ExpectedEvent] {
        switch outcome {
        case .refused, .notStored: return []
        case .acknowledged, .uncertain: break
        }
        return [
            ExpectedEvent(subject: .view(name), write: label) { $0.type == "view.dropped" && $0.droppedView == name }
        ]
    }
}
