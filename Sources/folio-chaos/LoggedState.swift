import FolioJSON

/// The store as the log says it must be: every event read so far, replayed here, independently of
/// foliod's own replay. Applying an event checks that it follows from the state before it.
final class LoggedState {
    private(set) var lastSeq: Int64 = 0
    private(set) var chainHead = [UInt8](repeating: 0, count: 32)
    private(set) var objects: [ObjectKey: ObjectState] = [:]
    private(set) var views: [String: ViewDefinition] = [:]
    /// Schemas by collection, as their `schema.defined` events give them.
    private(set) var schemas: [String: JSONObject] = [:]
    private(set) var eventsByNonce: [String: LoggedEvent] = [:]
    /// Every collection that ever had an object.
    private(set) var collections: Set<String> = []
    private var lastAt = ""
    /// The last id each generator made: they only increase, also across restarts. A single foliod
    /// is one generator; each node of a cluster is one (client k writes through node k mod N), and
    /// ids of different nodes may reach the log in either order (docs/CLUSTER.md).
    private var lastGeneratedID: [String]

    /// `generators`: 1 for a single foliod, N for a cluster of N nodes.
    init(generators: Int = 1) {
        lastGeneratedID = Array(repeating: "", count: max(1, generators))
    }

    /// The generator of a created object's id: the node of the client whose write (nonce `wCxN`)
    /// created it; nil if the event names no such write.
    private func generator(of event: LoggedEvent) -> Int? {
        guard lastGeneratedID.count > 1 else { return 0 }
        guard let nonce = event.nonce, nonce.hasPrefix("w"), let client = Int(nonce.dropFirst().prefix { $0 != "x" })
        else {
            return nil
        }
        return client % lastGeneratedID.count
    }

    /// Whether foliod chose the id: 26 characters of Crockford base32 (the workload's own ids have
    /// lower-case letters).
    static func isGenerated(_ id: String) -> Bool {
        id.utf8.count == 26 && id.utf8.allSatisfy { Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8).contains($0) }
    }

    /// Appends the next event, whose chain hash was checked to be `hash`.
    func apply(_ event: LoggedEvent, hash: [UInt8]) throws(Violation) {
        guard event.seq == lastSeq + 1 else {
            throw Violation("log: event \(event.seq) follows event \(lastSeq); sequences must be contiguous")
        }
        guard event.at >= lastAt else {
            throw Violation("log: \(event) was accepted at \(event.at), before the event ahead of it (\(lastAt))")
        }
        lastAt = event.at
        if let nonce = event.nonce {
            if let earlier = eventsByNonce[nonce] {
                throw Violation("log: the write \(nonce) appears twice, in events \(earlier.seq) and \(event.seq)")
            }
            eventsByNonce[nonce] = event
        }
        switch event.type {
        case "created", "updated", "deleted":
            let key = event.key!
            let prior = objects[key] ?? .neverCreated
            guard event.version == prior.version + 1 else {
                throw Violation("log: \(event) gives \(key) version \(event.version!) after \(prior)")
            }
            switch event.type {
            case "created":
                guard !prior.isPresent else { throw Violation("log: \(event) creates \(key), which exists (\(prior))") }
                if prior.version == 0 && Self.isGenerated(key.id), let generator = generator(of: event) {
                    guard key.id > lastGeneratedID[generator] else {
                        throw Violation(
                            "log: \(event) has the generated id \(key.id), not above the last one"
                                + (lastGeneratedID.count > 1 ? " of node \(generator + 1)" : "")
                                + ", \(lastGeneratedID[generator])")
                    }
                    lastGeneratedID[generator] = key.id
                }
                objects[key] = ObjectState(version: prior.version + 1, data: event.data)
                collections.insert(key.collection)
            case "updated":
                guard let data = prior.data else { throw Violation("log: \(event) updates \(key), which is \(prior)") }
                let patched = MergePatch.apply(event.patch!, to: data)
                guard let updated = event.ops.map({ FieldOps.apply($0, to: patched) }) ?? patched else {
                    throw Violation("log: the field operations of \(event) do not apply to \(key), which is \(prior)")
                }
                objects[key] = ObjectState(version: prior.version + 1, data: updated)
            default:
                guard prior.isPresent else { throw Violation("log: \(event) deletes \(key), which is \(prior)") }
                objects[key] = ObjectState(version: prior.version + 1, data: nil)
            }
        case "schema.defined":
            schemas[event.schema!["collection"]!.stringValue!] = event.schema!
        case "view.defined":
            let definition = event.view!
            guard views[definition.name] == nil else { throw Violation("log: \(event) defines a view that exists") }
            views[definition.name] = definition
        default:
            guard views.removeValue(forKey: event.droppedView!) != nil else {
                throw Violation("log: \(event) drops a view that does not exist")
            }
        }
        lastSeq = event.seq
        chainHead = hash
    }
}
