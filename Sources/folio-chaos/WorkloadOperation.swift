import FolioJSON

/// One request of the workload. Each kind says what it sends, how its answer (or the lack of one)
/// changes what the client may expect, and which log events it appends when applied, so a new kind
/// (a batch, a field operation, a request key) is one more type that conforms.
protocol WorkloadOperation {
    /// The request line, without a tag.
    var request: JSON { get }

    /// A short account of the write, for messages.
    var label: String { get }

    /// What kind of write this is, for the figures ("create", "batch", "retry", ...).
    var kind: String { get }

    /// The `requestKey` the request carries; its last event must then record it.
    var requestKey: String? { get }

    /// Takes the answer into the ledger: an acknowledged write fixes its subject's state, a refusal
    /// narrows the possibilities, no answer widens them. Throws when the answer fits no possibility.
    func record(_ outcome: Outcome.Kind, in ledger: ClientLedger) throws(Violation)

    /// The log events the write appends if it was applied, for an acknowledged or uncertain outcome:
    /// all of them are in the log or none is. `log` finds the key of an object whose id foliod chose.
    func expectedEvents(_ outcome: Outcome.Kind, in log: LoggedState) -> [ExpectedEvent]

    /// The ops of a batch sent with a request key that must be recorded as failed (index → error code).
    func expectedFailures(_ outcome: Outcome.Kind) -> [Int: String]

    /// After a restart, for a write without an answer: whether the log holds it, with its events.
    func settled(applied: Bool, events: [(expected: ExpectedEvent, event: LoggedEvent)], in ledger: ClientLedger)
}

extension WorkloadOperation {
    var requestKey: String? { nil }
    func expectedFailures(_ outcome: Outcome.Kind) -> [Int: String] { [:] }
    func settled(applied: Bool, events: [(expected: ExpectedEvent, event: LoggedEvent)], in ledger: ClientLedger) {}
}

/// What a write's log event must look like, and what it touches.
struct ExpectedEvent {
    let subject: LogSubject
    /// A short account of the write, for messages.
    let write: String
    /// Which command of the write (op of a batch) made it.
    var command = 0
    /// Made by a delete rule: it follows its command's own event and names an event of the same
    /// write as its `cause`. A command's own event has none.
    var consequence = false
    let matches: (LoggedEvent) -> Bool

    init(subject: LogSubject, write: String, matches: @escaping (LoggedEvent) -> Bool) {
        self.subject = subject
        self.write = write
        self.matches = matches
    }

    init(
        subject: LogSubject, write: String, command: Int, consequence: Bool,
        matches: @escaping (LoggedEvent) -> Bool
    ) {
        self.init(subject: subject, write: write, matches: matches)
        self.command = command
        self.consequence = consequence
    }
}

/// What a log event touches: the events of one subject come from one client, in its order.
enum LogSubject: Hashable, CustomStringConvertible {
    case object(ObjectKey)
    case view(String)
    case schema(String)

    var description: String {
        switch self {
        case .object(let key): return key.description
        case .view(let name): return "view \(name)"
        case .schema(let collection): return "schema of \(collection)"
        }
    }
}
