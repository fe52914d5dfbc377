import FolioJSON

/// `schema.define` of one of `RuleSchemas`, sent before a store's first workload, with foliod idle:
/// it must be acknowledged, with the schema as defined.
struct SchemaDefineOperation: WorkloadOperation {
    let schema: JSONObject

    var request: JSON { .object(JSONObject([.init(key: "op", value: "schema.define")] + schema.fields)) }

    var kind: String { "schema.define" }

    private var collection: String { schema["collection"]?.stringValue ?? "" }

    var label: String { "schema.define \(collection)" }

    func record(_ outcome: Outcome.Kind, in ledger: ClientLedger) throws(Violation) {
        guard case .acknowledged(let result) = outcome, result == schema else {
            throw Violation("\(label): answered \(outcome), not the schema \(JSON.object(schema))")
        }
    }

    func expectedEvents(_ outcome: Outcome.Kind, in log: LoggedState) -> [ExpectedEvent] {
        [
            ExpectedEvent(subject: .schema(collection), write: label) {
                $0.type == "schema.defined" && $0.schema == schema
            }
        ]
    }
}
