import FolioJSON

/// A write the model works out in full before it is sent (`WriteEffect`): one create, update or
/// delete of the client's objects, or a batch of them, atomic or not, with `{"$result": n}` between
/// ops, field operations and delete rules, maybe with a request key. It touches tasks, counters and
/// the collections of `RuleSchemas`, never `Item`, whose unique views can refuse an op because of
/// other clients' objects.
struct ModelWrite: WorkloadOperation {
    enum Form: Equatable {
        case single
        case batch(atomic: Bool)
    }

    let commands: [ModelCommand]
    let form: Form
    let requestKey: String?
    let effect: WriteEffect
    /// A keyed request that was not applied, sent again: foliod runs it as new.
    let isRetry: Bool

    /// Throws when the model cannot tell what the write would do.
    init(commands: [ModelCommand], form: Form, requestKey: String?, isRetry: Bool = false, ledger: ClientLedger)
        throws(ModelWorld.Indeterminate)
    {
        precondition(form != .single || commands.count == 1, "a single write has one command")
        self.commands = commands
        self.form = form
        self.requestKey = requestKey
        self.isRetry = isRetry
        effect = try WriteEffect(commands, form: form, ledger: ledger)
    }

    var request: JSON { Self.request(commands, form: form, requestKey: requestKey) }

    static func request(_ commands: [ModelCommand], form: Form, requestKey: String?) -> JSON {
        var fields: [JSONObject.Field]
        switch form {
        case .single:
            fields = commands[0].wire.fields
        case .batch(let atomic):
            fields = [
                .init(key: "op", value: "batch"), .init(key: "ops", value: .array(commands.map { .object($0.wire) })),
            ]
            if !atomic { fields.append(.init(key: "atomic", value: false)) }
        }
        if let requestKey { fields.append(.init(key: "requestKey", value: .string(requestKey))) }
        return .object(JSONObject(fields))
    }

    var kind: String {
        if isRetry { return "retry, run as new" }
        switch form {
        case .single: return "\(commands[0].opName) of \(commands[0].collection)"
        case .batch(atomic: true): return "atomic batch"
        case .batch(atomic: false): return "batch (atomic: false)"
        }
    }

    var label: String {
        let body = commands.map(\.label).joined(separator: "; ")
        let key = requestKey.map { " key \($0)" } ?? ""
        switch form {
        case .single: return body + key
        case .batch(let atomic): return "\(atomic ? "atomic batch" : "batch (atomic: false)")\(key) [\(body)]"
        }
    }

    // MARK: Answers

    func record(_ outcome: Outcome.Kind, in ledger: ClientLedger) throws(Violation) {
        switch outcome {
        case .acknowledged(let result):
            if let refusal = effect.refusal {
                throw Violation(
                    "\(label) was acknowledged (\(JSON.object(result))); the model has it refused with \(refusal.failure)"
                        + (refusal.index.map { " at op \($0)" } ?? ""))
            }
            let items = try answerItems(result)
            var chosen: [ObjectKey] = []
            for (index, (op, item)) in zip(effect.ops, items).enumerated() {
                if let key = try check(op, item, index, ledger) { chosen.append(key) }
            }
            for (key, state) in effect.after {
                ledger.track(key)
                ledger.objects[key] = Possibilities(state)
            }
            for key in chosen {
                ledger.track(key)
                ledger.objects[key] = Possibilities(ObjectState(object: Self.answerObject(items, of: key)!))
            }
            for (key, amount) in effect.increments { ledger.counters[key, default: CounterTally()].acknowledge(amount) }
            ledger.remember(self, effect.writes ? .answered(result) : .notApplied)
        case .refused(let code, let error):
            guard let refusal = effect.refusal else {
                throw Violation("\(label) was refused with \(JSON.object(error)); the model has it applied")
            }
            if let problem = Self.problem(error, refusal.failure) ?? indexProblem(error, refusal.index) {
                throw Violation("\(label) was refused with \(code) \(JSON.object(error)): \(problem)")
            }
            ledger.remember(self, .notApplied)
        case .notStored:
            // Nothing changed, its request key included: a retry runs as new.
            ledger.remember(self, .notApplied)
        case .uncertain:
            ledger.remember(self, .unanswered)
            guard effect.refusal == nil else { return }
            for (key, state) in effect.after {
                ledger.track(key)
                ledger.objects[key]!.include(state)
            }
            for (command, op) in zip(commands, effect.ops) where command.key == nil {
                if case .applied = op, let nonce = command.nonce { ledger.pendingCreates[nonce] = command.collection }
            }
            for (key, amount) in effect.increments {
                ledger.counters[key, default: CounterTally()].leaveUnanswered(amount)
            }
        }
    }

    /// The answer of each command: `{"ok": true, "result": …}` or `{"ok": false, "error": …}`.
    private func answerItems(_ result: JSONObject) throws(Violation) -> [JSONObject] {
        guard case .batch = form else { return [["ok": true, "result": .object(result)]] }
        guard case .array(let list)? = result["results"], list.count == commands.count else {
            throw Violation("\(label): the answer has not \(commands.count) results: \(JSON.object(result))")
        }
        var items: [JSONObject] = []
        for item in list {
            guard case .object(let object) = item else {
                throw Violation("\(label): a result is not an object: \(item)")
            }
            items.append(object)
        }
        return items
    }

    private static func answerObject(_ items: [JSONObject], of key: ObjectKey) -> JSONObject? {
        items.lazy.compactMap { $0["result"]?.objectValue }.first {
            $0["collection"]?.stringValue == key.collection && $0["id"]?.stringValue == key.id
        }
    }

    /// Checks one command's answer against the model; returns the object's key if foliod chose its id.
    private func check(_ op: WriteEffect.Op, _ item: JSONObject, _ index: Int, _ ledger: ClientLedger)
        throws(Violation) -> ObjectKey?
    {
        let command = commands[index]
        let write = "\(label), op \(index) \(command.label)"
        switch op {
        case .applied(let expected, _):
            guard item["ok"] == .bool(true), case .object(let answer)? = item["result"] else {
                throw Violation("\(write) failed with \(JSON.object(item)); the model has it applied")
            }
            switch expected {
            case .object(let key, let state):
                guard answer["collection"]?.stringValue == command.collection, let id = answer["id"]?.stringValue,
                    key == nil || key?.id == id
                else { throw Violation("\(write) was answered with another object: \(JSON.object(answer))") }
                guard ObjectState(object: answer) == state else {
                    throw Violation("\(write) was answered \(JSON.object(answer)); the model makes it \(state)")
                }
                guard key == nil else { return nil }
                let chosen = ObjectKey(collection: command.collection, id: id)
                guard LoggedState.isGenerated(id), ledger.objects[chosen] == nil else {
                    throw Violation("\(write): foliod chose the id \(id), not a new generated one")
                }
                return chosen
            case .deleted(let key, let version):
                guard answer["id"]?.stringValue == key.id, answer["version"]?.integerValue == version else {
                    throw Violation(
                        "\(write) was answered \(JSON.object(answer)); the model deletes at version \(version)")
                }
                return nil
            }
        case .failed(let failure):
            guard item["ok"] == .bool(false), case .object(let error)? = item["error"] else {
                throw Violation("\(write) was applied (\(JSON.object(item))); the model has it fail with \(failure)")
            }
            if let problem = Self.problem(error, failure) {
                throw Violation("\(write) failed with \(JSON.object(error)): \(problem)")
            }
            return nil
        }
    }

    /// Why `error` is not the failure the model expects; nil if it is.
    private static func problem(_ error: JSONObject, _ failure: ModelWorld.Failure) -> String? {
        guard error["code"]?.stringValue == failure.code else { return "the model expects \(failure)" }
        if let current = failure.currentVersion, error["currentVersion"]?.integerValue != current {
            return "the model has the object at version \(current)"
        }
        if let referrers = failure.referrers {
            guard case .array(let named)? = error["referrers"], !named.isEmpty,
                named.allSatisfy({ $0.stringValue.map(referrers.contains) ?? false })
            else { return "the model has it denied by \(referrers.sorted())" }
        }
        return nil
    }

    private func indexProblem(_ error: JSONObject, _ index: Int?) -> String? {
        guard let index else { return nil }
        return error["index"]?.integerValue == Int64(index) ? nil : "the model has op \(index) fail"
    }

    // MARK: The log

    func expectedEvents(_ outcome: Outcome.Kind, in log: LoggedState) -> [ExpectedEvent] {
        guard effect.refusal == nil else { return [] }
        var answerItems: [JSONObject]?
        switch outcome {
        case .refused, .notStored: return []
        case .acknowledged(let result): answerItems = try? self.answerItems(result)
        case .uncertain: break
        }
        var expected: [ExpectedEvent] = []
        for (index, op) in effect.ops.enumerated() {
            guard case .applied(_, let changes) = op else { continue }
            let command = commands[index]
            for change in changes {
                let key = change.key ?? chosenKey(index, answerItems, log)
                let write = "\(label), op \(index) \(command.label)" + (change.consequence ? ", a consequence" : "")
                expected.append(
                    ExpectedEvent(
                        subject: .object(key), write: write, command: index, consequence: change.consequence
                    ) { event in
                        event.type == change.type && event.version == change.version
                            && (change.type != "created" || event.data == change.data)
                            && (change.type != "updated" || event.patch == change.patch && event.ops == change.ops)
                    })
            }
        }
        return expected
    }

    /// The key of the object op `index` created with an id foliod chose: from the answer, or from the
    /// log by its nonce; one no event has when neither tells.
    private func chosenKey(_ index: Int, _ answerItems: [JSONObject]?, _ log: LoggedState) -> ObjectKey {
        let command = commands[index]
        if let id = answerItems?[index]["result"]?.objectValue?["id"]?.stringValue {
            return ObjectKey(collection: command.collection, id: id)
        }
        if let nonce = command.nonce, let key = log.eventsByNonce[nonce]?.key { return key }
        return ObjectKey(collection: command.collection, id: "?\(command.nonce ?? "")")
    }

    func expectedFailures(_ outcome: Outcome.Kind) -> [Int: String] {
        form == .batch(atomic: false) ? effect.failures : [:]
    }

    /// A keyed write whose answer was lost: a retry must now get what its events imply (or run as new).
    func settled(applied: Bool, events: [(expected: ExpectedEvent, event: LoggedEvent)], in ledger: ClientLedger) {
        guard let requestKey, let entry = ledger.keyedRequests[requestKey], case .unanswered = entry.status else {
            return
        }
        ledger.lostAnswers.append(requestKey)
        guard applied else {
            entry.status = .notApplied
            return
        }
        let failed = events.map(\.event).max { $0.seq < $1.seq }?.request?["failed"]
        var items: [ReplayExpectation.Item] = []
        for (index, op) in effect.ops.enumerated() {
            switch op {
            case .applied(let result, _):
                let own = events.first { $0.expected.command == index && !$0.expected.consequence }!.event
                switch result {
                case .object(_, let state): items.append(.object(own.key!, state, updatedAt: own.at))
                case .deleted(let key, let version): items.append(.deleted(key, version: version))
                }
            case .failed(let failure):
                let message = failed?.arrayElements.first { $0.objectValue?["index"]?.integerValue == Int64(index) }
                items.append(.failed(code: failure.code, message: message?.objectValue?["message"]?.stringValue))
            }
        }
        entry.status = .appliedUnanswered(.derived(batch: form != .single, items))
    }

    // MARK: Faults

    /// For `--split-batches`: an atomic batch without a key as two atomic batches, and where the
    /// second starts; nil when every split would leave a `{"$result"}` in the second half.
    var halves: (first: JSON, second: JSON, offset: Int)? {
        guard form == .batch(atomic: true), requestKey == nil, commands.count >= 2 else { return nil }
        for offset in stride(from: commands.count / 2, to: 0, by: -1)
        where !commands[offset...].contains(where: { !$0.namedResults.isEmpty }) {
            return (
                Self.request(Array(commands[..<offset]), form: form, requestKey: nil),
                Self.request(Array(commands[offset...]), form: form, requestKey: nil), offset
            )
        }
        return nil
    }
}

extension JSON {
    var arrayElements: [JSON] {
        if case .array(let elements) = self { return elements }
        return []
    }
}
