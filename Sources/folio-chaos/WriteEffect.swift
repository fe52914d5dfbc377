import FolioJSON

/// What a model write does to the client's objects, worked out before it is sent (the client's
/// objects are then each in one known state): each op's outcome with its events, the states after,
/// the increments of counters, or the failure that refuses the whole request.
struct WriteEffect {
    enum Op {
        case applied(ModelWorld.Result, [ModelWorld.Change])
        case failed(ModelWorld.Failure)
    }

    /// Per command, in order; empty when the request is refused as a whole.
    private(set) var ops: [Op] = []
    /// The failure that refuses the whole request (a single command's, or an atomic batch's first),
    /// with the op's index in an atomic batch.
    private(set) var refusal: (failure: ModelWorld.Failure, index: Int?)?
    /// The objects the write changes, before and after (objects whose id foliod chooses are not here).
    private(set) var before: [ObjectKey: ObjectState] = [:]
    private(set) var after: [ObjectKey: ObjectState] = [:]
    /// What the write adds to each counter's `count`.
    private(set) var increments: [ObjectKey: Int64] = [:]

    /// Whether it appends events (a refused write, or a batch whose ops all fail, does not).
    var writes: Bool {
        ops.contains {
            if case .applied = $0 { return true }
            return false
        }
    }

    /// The ops that fail inside a batch that is not atomic: index → error code.
    var failures: [Int: String] {
        var failures: [Int: String] = [:]
        for (index, op) in ops.enumerated() {
            if case .failed(let failure) = op { failures[index] = failure.code }
        }
        return failures
    }

    /// Runs `commands` as one request of `form` on the client's objects as the ledger knows them.
    init(_ commands: [ModelCommand], form: ModelWrite.Form, ledger: ClientLedger) throws(ModelWorld.Indeterminate) {
        var world = ModelWorld(ledger: ledger)
        var results: [ObjectKey?] = []
        var failed = Set<Int>()
        for (index, command) in commands.enumerated() {
            let outcome = try world.run(command, results: results, failed: failed)
            switch outcome {
            case .applied(let result, _):
                if case .object(let key, _) = result { results.append(key) } else { results.append(command.key) }
                if command.collection == RuleSchemas.counter, let key = command.key,
                    case .update(_, let fieldOps?, _) = command.action,
                    case .int(let amount)? = fieldOps["count"]?.objectValue?["$inc"]
                {
                    increments[key, default: 0] += amount
                }
            case .failed(let failure):
                switch form {
                case .single, .batch(atomic: true):
                    refusal = (failure, form == .single ? nil : index)
                    ops = []
                    increments = [:]
                    return
                case .batch(atomic: false):
                    failed.insert(index)
                    results.append(nil)
                }
            }
            ops.append(Self.op(outcome))
        }
        after = world.changed
        let start = ModelWorld(ledger: ledger)
        for key in after.keys { before[key] = try start.state(key) }
    }

    private static func op(_ outcome: ModelWorld.Outcome) -> Op {
        switch outcome {
        case .applied(let result, let changes): return .applied(result, changes)
        case .failed(let failure): return .failed(failure)
        }
    }
}
