/// One row of the benchmark: how many clients, how deep each pipelines, what share of requests read.
struct Scenario: Sendable {
    /// Short name for `--only`, e.g. `create-16`.
    let id: String
    let title: String
    let clients: Int
    /// Requests each client sends before reading their answers (1: one at a time).
    let depth: Int
    /// Percent of requests that are reads of pre-populated keys; the rest create fresh keys.
    let readPercent: Int
    /// What the writes are: `create`, `createNamed`, `update` or `createBatch`.
    var writeKind: Operation.Kind = .create
    /// Open loop: every client sends its batches on a fixed schedule, so that all together send
    /// this many requests a second. Nil: closed loop, each batch as soon as the last is answered.
    var requestsPerSecond: Double?

    var writes: Bool { readPercent < 100 }

    /// The scenarios of the issue, in the order they run.
    static let standard: [Scenario] = [
        Scenario(id: "create-1", title: "durable create", clients: 1, depth: 1, readPercent: 0),
        Scenario(id: "create-16", title: "durable create", clients: 16, depth: 1, readPercent: 0),
        Scenario(id: "create-64", title: "durable create", clients: 64, depth: 1, readPercent: 0),
        Scenario(
            id: "named-16", title: "durable create, client id", clients: 16, depth: 1, readPercent: 0,
            writeKind: .createNamed),
        Scenario(
            id: "named-64", title: "durable create, client id", clients: 64, depth: 1, readPercent: 0,
            writeKind: .createNamed),
        Scenario(id: "get-1", title: "get by id", clients: 1, depth: 1, readPercent: 100),
        Scenario(id: "get-16", title: "get by id", clients: 16, depth: 1, readPercent: 100),
        Scenario(id: "pipelined-16", title: "pipelined get, depth 32", clients: 16, depth: 32, readPercent: 100),
        Scenario(id: "mixed-16", title: "mixed 90% get / 10% create", clients: 16, depth: 1, readPercent: 90),
    ]

    /// Run only when `--only` names them: more clients than `make bench` needs, for a cluster of
    /// nodes (`make bench-cluster`).
    static let extra: [Scenario] = [
        Scenario(id: "get-64", title: "get by id", clients: 64, depth: 1, readPercent: 100)
    ]

    /// An atomic batch of 100 creates against 100 separate creates, pipelined and one at a time, at 1
    /// and 16 clients (`folio-bench relations`); Folio only.
    static let batches: [Scenario] = [1, 16].flatMap { clients in
        [
            Scenario(
                id: "batch-\(clients)", title: "atomic batch of \(Operation.batchSize) creates", clients: clients,
                depth: 1, readPercent: 0,
                writeKind: .createBatch),
            Scenario(
                id: "pipelined-create-\(clients)", title: "\(Operation.batchSize) creates, pipelined", clients: clients,
                depth: Operation.batchSize, readPercent: 0),
            Scenario(
                id: "create-\(clients)", title: "creates one at a time", clients: clients, depth: 1, readPercent: 0),
        ]
    }
}
