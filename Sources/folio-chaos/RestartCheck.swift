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
        try verify(&figures)
        return figures
    }

    /// Each subject's new events must be, in order, the events of its client's writes that were
    /// applied: every acknowledged one, each uncertain one entirely or not at all, no refused one,
    /// nothing else.
    private func matchHistory(_ events: [LoggedEvent], _ figures: inout Figures) throws(Violation) {
        var bySubject: [LogSubject: [LoggedEvent]] = [:]
        for event in events { bySubject[event.subject, default: []].append(event) }
        var next: [LogSubject: Int] = [:]
        for ledger in ledgers {
            for record in ledger.records {
                let request = "\(record.operation.request)"
                let outcome = try record.outcome.classify(request)
                let expected = record.operation.expectedEvents(outcome, in: logged)
                let found = expected.filter { expectation in
                    let queue = bySubject[expectation.subject] ?? []
                    let index = next[expectation.subject] ?? 0
                    return index < queue.count && expectation.matches(queue[index])
                }
                figures.writes += 1
                switch outcome {
                case .acknowledged:
                    figures.acknowledged += 1
                    if let missing = expected.first(where: { expectation in
                        !found.contains { $0.subject == expectation.subject }
                    }) {
                        let queue = bySubject[missing.subject] ?? []
                        let index = next[missing.subject] ?? 0
                        throw Violation(
                            "the acknowledged write \(missing.write) is not in the log where it belongs; the log has "
                                + (index < queue.count ? "\(queue[index])" : "no further event of \(missing.subject)")
                                + "\n  answer: \(record.outcome)")
                    }
                case .refused:
                    figures.refused += 1
                case .uncertain:
                    figures.uncertain += 1
                    guard found.isEmpty || found.count == expected.count else {
                        throw Violation(
                            "the unanswered write \(request) is in the log only in part: \(found.map(\.write)) of \(expected.map(\.write))"
                        )
                    }
                    if !expected.isEmpty && found.count == expected.count { figures.uncertainApplied += 1 }
                }
                for expectation in found { next[expectation.subject, default: 0] += 1 }
            }
        }
        for (subject, queue) in bySubject where (next[subject] ?? 0) < queue.count {
            throw Violation(
                "the log holds \(queue[next[subject] ?? 0]), which no request explains (or not in that order)")
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
