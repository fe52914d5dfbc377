import FolioClient
import FolioJSON

/// The checks after a restart, with foliod idle: the new log events against every client's
/// requests and answers, the logged state against each client's expected possibilities, the
/// live objects and views against the log, then `verify` and `stats`.
struct RestartCheck {
    /// What the checks counted.
    struct Figures {
        var writes = 0
        var acknowledged = 0
        var refused = 0
        var uncertain = 0
        var uncertainApplied = 0
        var events = 0
        var objects = 0
        var digest = ""
        var chainHead = ""
        var verifySeconds = 0.0
        /// Events made by delete rules, checked.
        var consequences = 0
        var keyed = 0
        var countersChecked = 0
        /// Writes of each kind: [sent, acknowledged, refused, unknown, unknown and found applied].
        var kinds: [String: [Int]] = [:]

        mutating func count(_ operation: any WorkloadOperation, _ outcome: Outcome.Kind, applied: Bool) {
            writes += 1
            if operation.requestKey != nil { keyed += 1 }
            var figures = kinds[operation.kind] ?? [0, 0, 0, 0, 0]
            figures[0] += 1
            switch outcome {
            case .acknowledged:
                acknowledged += 1
                figures[1] += 1
            case .refused, .notStored:
                refused += 1
                figures[2] += 1
            case .uncertain:
                uncertain += 1
                figures[3] += 1
                if applied {
                    uncertainApplied += 1
                    figures[4] += 1
                }
            }
            kinds[operation.kind] = figures
        }
    }

    let connection: FolioConnection
    let ledgers: [ClientLedger]
    let logged: LoggedState

    func run() throws(Violation) -> Figures {
        var figures = Figures()
        let newEvents = try LogReader(connection: connection).readNewEvents(into: logged)
        figures.events = newEvents.count
        try matchHistory(newEvents, &figures)
        try settleExpectations()
        try compareLiveObjects(&figures)
        try compareViews()
        try compareSchemas()
        try checkCounters(&figures)
        try verify(&figures)
        return figures
    }

    /// Each subject's new events must be, in order, the events of its client's writes that were
    /// applied: every acknowledged one, each uncertain one entirely or not at all, no refused one,
    /// nothing else. The events of one write are contiguous in the log (`requestShape`).
    private func matchHistory(_ events: [LoggedEvent], _ figures: inout Figures) throws(Violation) {
        var bySubject: [LogSubject: [LoggedEvent]] = [:]
        for event in events { bySubject[event.subject, default: []].append(event) }
        var next: [LogSubject: Int] = [:]
        for ledger in ledgers {
            for record in ledger.records {
                let request = "\(record.operation.request)"
                let outcome = try record.outcome.classify(request)
                let expected = record.operation.expectedEvents(outcome, in: logged)
                // Expectations of one subject take its next events in turn. (A write found only in
                // part is a violation, so what it took need not be given back.)
                var found: [(expected: ExpectedEvent, event: LoggedEvent)] = []
                var missing: ExpectedEvent?
                for expectation in expected {
                    let queue = bySubject[expectation.subject] ?? []
                    let index = next[expectation.subject] ?? 0
                    if index < queue.count && expectation.matches(queue[index]) {
                        found.append((expectation, queue[index]))
                        next[expectation.subject] = index + 1
                    } else if missing == nil {
                        missing = expectation
                    }
                }
                figures.count(record.operation, outcome, applied: !expected.isEmpty && missing == nil)
                switch outcome {
                case .acknowledged:
                    if let missing {
                        let queue = bySubject[missing.subject] ?? []
                        let index = next[missing.subject] ?? 0
                        throw Violation(
                            "the acknowledged write \(missing.write) is not in the log where it belongs; the log has "
                                + (index < queue.count ? "\(queue[index])" : "no further event of \(missing.subject)")
                                + "\n  answer: \(record.outcome)")
                    }
                case .refused, .notStored:
                    // Its events, if the log held any, are left for the check below: unexplained.
                    break
                case .uncertain:
                    guard found.isEmpty || missing == nil else {
                        throw Violation(
                            "the unanswered write \(request) is in the log only in part: \(found.map(\.expected.write)) of \(expected.map(\.write))"
                        )
                    }
                    record.operation.settled(applied: !found.isEmpty, events: found, in: ledger)
                }
                if !found.isEmpty { try requestShape(record.operation, outcome, found) }
                figures.consequences += found.filter(\.expected.consequence).count
            }
        }
        for (subject, queue) in bySubject where (next[subject] ?? 0) < queue.count {
            throw Violation(
                "the log holds \(queue[next[subject] ?? 0]), which no request explains (or not in that order)")
        }
    }

    /// The events of one applied write: contiguous in the log; each command's own event in command
    /// order without a `cause`, the events its delete rules made after it and before the next command's,
    /// each naming an earlier event of the write as its `cause`; the last event, and only it, recording
    /// the request key (with the number of events and the failed ops of a batch that is not atomic).
    private func requestShape(
        _ operation: any WorkloadOperation, _ outcome: Outcome.Kind,
        _ found: [(expected: ExpectedEvent, event: LoggedEvent)]
    ) throws(Violation) {
        let write = operation.label
        let events = found.map(\.event).sorted { $0.seq < $1.seq }
        let seqs = Set(events.map(\.seq))
        guard events.last!.seq - events.first!.seq + 1 == Int64(events.count) else {
            throw Violation(
                "the events of \(write) are not contiguous in the log: \(events.map(\.seq)); events of other writes lie between"
            )
        }
        var own: [Int: Int64] = [:]
        for (expected, event) in found where !expected.consequence {
            guard event.cause == nil else { throw Violation("\(event) of \(expected.write) names a cause") }
            own[expected.command] = event.seq
        }
        let commands = own.keys.sorted()
        guard zip(commands, commands.dropFirst()).allSatisfy({ own[$0]! < own[$1]! }) else {
            throw Violation("the commands of \(write) are not in order in the log: \(own)")
        }
        for (expected, event) in found where expected.consequence {
            let start = own[expected.command] ?? Int64.max
            let end = commands.first { $0 > expected.command }.map { own[$0]! } ?? Int64.max
            guard let cause = event.cause, seqs.contains(cause), cause >= start, cause < event.seq, event.seq < end
            else {
                throw Violation(
                    "\(event) of \(expected.write) does not follow its command's event \(start) with a cause among the write's events"
                )
            }
        }
        if let recorded = events.dropLast().first(where: { $0.request != nil }) {
            throw Violation("\(recorded) records a request but is not the last event of \(write)")
        }
        let last = events.last!
        guard let key = operation.requestKey else {
            guard last.request == nil else {
                throw Violation("\(last) records a request for \(write), sent without a key")
            }
            return
        }
        let failed = last.request?["failed"]?.arrayElements.compactMap(\.objectValue) ?? []
        var recordedFailures: [Int: String] = [:]
        for failure in failed {
            if let index = failure["index"]?.integerValue, let code = failure["code"]?.stringValue {
                recordedFailures[Int(index)] = code
            }
        }
        guard let request = last.request, request["key"]?.stringValue == key,
            request["events"]?.integerValue == Int64(events.count),
            request["digest"]?.stringValue?.utf8.count == 64,
            recordedFailures == operation.expectedFailures(outcome), failed.count == recordedFailures.count
        else {
            throw Violation(
                "\(last), the last of the \(events.count) events of \(write), does not record its key \(key), its event count and failed ops \(operation.expectedFailures(outcome))"
            )
        }
    }

    /// What the log says each object and view is now must be one of its client's possibilities;
    /// from now on it is the only one.
    private func settleExpectations() throws(Violation) {
        var owned = Set<ObjectKey>()
        for ledger in ledgers {
            for (nonce, collection) in ledger.pendingCreates {
                guard let event = logged.eventsByNonce[nonce], let key = event.key else { continue }
                guard key.collection == collection, ledger.objects[key] == nil else {
                    throw Violation("the unanswered create [\(nonce)] appears in the log as \(event)")
                }
                ledger.track(key)
                ledger.objects[key]!.widen { _ in .applied(ObjectState(version: 1, data: event.data)) }
            }
            ledger.pendingCreates = [:]
            for key in ledger.objectKeys {
                try ledger.objects[key]!.settle(
                    on: logged.objects[key] ?? .neverCreated, "\(key) (client \(ledger.client))")
                owned.insert(key)
            }
            for name in ledger.viewNames {
                try ledger.views[name]!.settle(
                    on: logged.views[name].map { .defined($0) } ?? .absent, "view \(name) (client \(ledger.client))")
            }
            ledger.records = []
        }
        if let stray = logged.objects.keys.first(where: { !owned.contains($0) }) {
            throw Violation("the log holds \(stray), which no client wrote")
        }
    }

    /// `list` of every collection, page by page, must show exactly the objects the log leaves,
    /// and `stats` the same counts, head and chain.
    private func compareLiveObjects(_ figures: inout Figures) throws(Violation) {
        for collection in logged.collections.sorted() {
            var live: [ObjectKey: ObjectState] = [:]
            var cursor: JSON = .null
            repeat {
                var request: JSONObject = ["op": "list", "collection": .string(collection), "limit": 1000]
                if cursor != .null { request["after"] = cursor }
                let result = try connection.call(.object(request))
                guard case .array(let items)? = result["items"] else { throw Violation("list \(collection): no items") }
                for item in items {
                    guard case .object(let object) = item, let id = object["id"]?.stringValue else {
                        throw Violation("list \(collection): malformed item \(item)")
                    }
                    let key = ObjectKey(collection: collection, id: id)
                    guard live.updateValue(ObjectState(object: object), forKey: key) == nil else {
                        throw Violation("list \(collection) shows \(key) twice")
                    }
                }
                cursor = result["next"] ?? .null
            } while cursor != .null
            let expected = logged.objects.filter { $0.key.collection == collection && $0.value.isPresent }
            for (key, state) in expected where live[key] != state {
                throw Violation(
                    "\(key) is \(live[key].map(\.description) ?? "missing") in the live store; its log makes it \(state)"
                )
            }
            if let extra = live.keys.first(where: { expected[$0] == nil }) {
                throw Violation("the live store lists \(extra) (\(live[extra]!)), which its log leaves absent")
            }
            figures.objects += live.count
        }
        let stats = try connection.call(["op": "stats"])
        guard stats["lastSeq"]?.integerValue == logged.lastSeq, stats["chainHead"]?.stringValue == hex(logged.chainHead)
        else {
            throw Violation(
                "stats reports lastSeq \(stats["lastSeq"] ?? .null), chainHead \(stats["chainHead"] ?? .null); the log read gives \(logged.lastSeq), \(hex(logged.chainHead))"
            )
        }
        for collection in logged.collections {
            let count = Int64(logged.objects.filter { $0.key.collection == collection && $0.value.isPresent }.count)
            guard stats["collections"]?.objectValue?[collection]?.integerValue == count else {
                throw Violation(
                    "stats counts \(stats["collections"] ?? .null) objects; the log leaves \(count) in \(collection)")
            }
        }
        guard let digest = stats["digest"]?.stringValue else { throw Violation("stats has no digest") }
        figures.digest = digest
        figures.chainHead = hex(logged.chainHead)
    }

    /// `view.list` must show the views the log leaves, each with the count of the objects its
    /// filter takes, and a unique view's objects must have distinct keys.
    private func compareViews() throws(Violation) {
        let result = try connection.call(["op": "view.list"])
        guard case .array(let entries)? = result["views"] else { throw Violation("view.list: no views") }
        var live: [String: (ViewDefinition, Int64)] = [:]
        for entry in entries {
            guard case .object(let object) = entry, let definition = ViewDefinition(object),
                let count = object["count"]?.integerValue
            else {
                throw Violation("view.list: malformed entry \(entry)")
            }
            live[definition.name] = (definition, count)
        }
        guard Set(live.keys) == Set(logged.views.keys) else {
            throw Violation("view.list shows \(live.keys.sorted()); the log leaves \(logged.views.keys.sorted())")
        }
        for (name, definition) in logged.views {
            let (shown, count) = live[name]!
            guard shown == definition else {
                throw Violation("view.list shows \(shown); the log defined \(definition)")
            }
            let members = logged.objects.filter { $0.key.collection == definition.collection }.compactMap(\.value.data)
                .filter(definition.includes)
            guard count == members.count else {
                throw Violation(
                    "view \(name) counts \(count) objects; \(members.count) of the logged objects match \(definition)")
            }
            if definition.unique {
                var seen: [[JSON]] = []
                for key in members.compactMap(definition.uniqueKey) {
                    if seen.contains(key) {
                        throw Violation("unique view \(definition) holds two objects with the key \(key)")
                    }
                    seen.append(key)
                }
            }
        }
    }

    /// `schema.list` must show the schemas the log defined.
    private func compareSchemas() throws(Violation) {
        let result = try connection.call(["op": "schema.list"])
        guard case .array(let entries)? = result["schemas"] else {
            throw Violation("schema.list: no schemas in \(result)")
        }
        var live: [String: JSONObject] = [:]
        for entry in entries {
            guard case .object(let schema) = entry, let collection = schema["collection"]?.stringValue else {
                throw Violation("schema.list: malformed entry \(entry)")
            }
            live[collection] = schema
        }
        guard live == logged.schemas else {
            throw Violation("schema.list shows \(result); the log defined \(logged.schemas)")
        }
    }

    /// Each counter's `count` must be the sum of its acknowledged increments plus those of a subset of
    /// the unanswered requests that incremented it (`CounterTally`, kept apart from the log).
    private func checkCounters(_ figures: inout Figures) throws(Violation) {
        for ledger in ledgers {
            for (key, tally) in ledger.counters {
                let count = logged.objects[key]?.data?["count"]?.integerValue ?? 0
                guard tally.allows(count) else {
                    throw Violation("counter \(key) is \(count) after the restart; \(tally.description)")
                }
                figures.countersChecked += 1
            }
        }
    }

    private func verify(_ figures: inout Figures) throws(Violation) {
        let clock = ContinuousClock()
        let start = clock.now
        let report = try connection.call(["op": "verify"])
        let elapsed = clock.now - start
        figures.verifySeconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        guard report["ok"] == .bool(true), report["mismatches"] == .array([]), report["chainBrokenAt"] == .null,
            report["lastSeq"]?.integerValue == logged.lastSeq, report["chainHead"]?.stringValue == figures.chainHead,
            report["digest"]?.stringValue == figures.digest
        else {
            throw Violation(
                "verify after the restart reports \(JSON.object(report)) (log read: lastSeq \(logged.lastSeq), stats digest \(figures.digest))"
            )
        }
    }
}
