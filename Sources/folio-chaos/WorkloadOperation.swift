import FolioJSON

/// One request of the workload. Each kind says what it sends, how its answer (or the lack of one)
/// changes what the client may expect, and which log events it appends when applied, so a new kind
/// (a batch, a field operation, a request key) is one more type that conforms.
protocol WorkloadOperation {
    /// The request line, without a tag.
    var request: JSON { get }

    /// Takes the answer into the ledger: an acknowledged write fixes its subject's state, a refusal
    /// narrows the possibilities, no answer widens them. Throws when the answer fits no possibility.
    func record(_ outcome: Outcome.Kind, in ledger: ClientLedger) throws(Violation)

    /// The log events the write appends if it was applied, for an acknowledged or uncertain outcome:
    /// all of them are in the log or none is. `log` finds the key of an object whose id foliod chose.
    func expectedEvents(_ outcome: Outcome.Kind, in log: LoggedState) -> [ExpectedEvent]
}

/// What a write's log event must look like, and what it touches.
struct ExpectedEvent {
    let subject: LogSubject
    /// A short account of the write, for messages.
    let write: String
    let matches: (LoggedEvent) -> Bool
}

/// What a log event touches: the events of one subject come from one client, in its order.
enum LogSubject: Hashable, CustomStringConvertible {
    case object(ObjectKey)
    case view(String)

    var description: String {
        switch self {
        case .object(let key): return key.description
        case .view(let name): return "view \(name)"
        }
    }
}
