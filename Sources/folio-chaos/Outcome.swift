import FolioJSON

/// What became of one request: the response line, or none (the connection ended first).
enum Outcome {
    case answered(JSON)
    case noAnswer(String)

    /// The three cases the expectation tells apart.
    enum Kind {
        /// `ok: true`: the write is applied and durable; its result.
        case acknowledged(JSONObject)
        /// A definite refusal: nothing changed. The error object (code, message, details).
        case refused(code: String, error: JSONObject)
        /// No answer, or `unavailable` (which may also mean "applied, but the flush failed"): it may
        /// or may not be applied.
        case uncertain(String)
        /// `unavailable` with "the write was not stored" (its commit failed, or writes had stopped):
        /// nothing changed, whatever the state, and the connection goes on.
        case notStored(String)
    }

    /// Throws for an answer no write of the workload may get (malformed, `bad_request`, `internal`).
    func classify(_ request: String) throws(Violation) -> Kind {
        switch self {
        case .noAnswer(let reason): return .uncertain(reason)
        case .answered(let response):
            guard case .object(let envelope) = response else {
                throw Violation("\(request): the answer is not an object: \(response)")
            }
            if envelope["ok"] == .bool(true), case .object(let result)? = envelope["result"] {
                return .acknowledged(result)
            }
            guard envelope["ok"] == .bool(false), case .object(let error)? = envelope["error"],
                let code = error["code"]?.stringValue
            else {
                throw Violation("\(request): malformed answer \(response)")
            }
            switch code {
            case "conflict", "not_found": return .refused(code: code, error: error)
            case "unavailable":
                let message = error["message"]?.stringValue ?? ""
                return message.hasPrefix("the write was not stored")
                    ? .notStored(message) : .uncertain("unavailable: \(message)")
            default: throw Violation("\(request): unexpected error answer \(response)")
            }
        }
    }
}
