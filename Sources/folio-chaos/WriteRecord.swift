import FolioJSON

/// One write the workload sent, with its answer or the lack of one.
struct WriteRecord {
    let client: Int
    let operation: any WorkloadOperation
    let outcome: Outcome

    /// The record as one journal line: request, then answer or why there was none.
    var journalLine: JSON {
        var fields: [JSONObject.Field] = [
            .init(key: "client", value: .int(Int64(client))), .init(key: "request", value: operation.request),
        ]
        switch outcome {
        case .answered(let response): fields.append(.init(key: "answer", value: response))
        case .noAnswer(let reason): fields.append(.init(key: "noAnswer", value: .string(reason)))
        }
        return .object(JSONObject(fields))
    }
}
