import FolioJSON
import FolioModel
import FolioProtocol
import FolioStore

/// A connection's peer as the policy sees it, with what it may read memoized per collection
/// (forgotten when the policy changes).
final class AccessView: @unchecked Sendable {
    let peer: Peer
    private(set) var policy: AccessPolicy
    /// Root and the daemon's user: every check passes.
    private(set) var isAdmin: Bool
    private var readable: [String: Bool] = [:]
    /// The role on each collection asked about, and the last one asked (a connection mostly asks
    /// about the same collection again: a string comparison, not a hash and a walk of the policy).
    private var roles: [String: AccessPolicy.Role] = [:]
    private var lastRole: (collection: String, role: AccessPolicy.Role)?

    init(peer: Peer, policy: AccessPolicy) {
        self.peer = peer
        self.policy = policy
        isAdmin = policy.role(of: peer, for: nil) == .admin
    }

    func update(_ policy: AccessPolicy) {
        self.policy = policy
        isAdmin = policy.role(of: peer, for: nil) == .admin
        readable.removeAll()
        roles.removeAll()
        lastRole = nil
    }

    var bestRole: AccessPolicy.Role { policy.bestRole(of: peer) }

    func role(for collection: String?) -> AccessPolicy.Role {
        if isAdmin { return .admin }
        guard let collection else { return policy.role(of: peer, for: nil) }
        if let lastRole, lastRole.collection == collection { return lastRole.role }
        let role: AccessPolicy.Role
        if let known = roles[collection] {
            role = known
        } else {
            role = policy.role(of: peer, for: collection)
            // Bounded: a peer may name many collections; past 1,024 the memo starts over.
            if roles.count >= 1024 { roles.removeAll() }
            roles[collection] = role
        }
        lastRole = (collection, role)
        return role
    }

    /// Whether events and objects of `collection` may be shown (nil: an event of no collection).
    func canRead(_ collection: String?) -> Bool {
        if isAdmin { return true }
        guard let collection else { return bestRole >= .read }
        if let known = readable[collection] { return known }
        let allowed = policy.role(of: peer, for: collection) >= .read
        readable[collection] = allowed
        return allowed
    }

    /// The same answers, for another thread (a worker): a copy that shares nothing mutable.
    var snapshot: AccessSnapshot { AccessSnapshot(peer: peer, policy: policy, isAdmin: isAdmin) }
}

/// An `AccessView` frozen for a worker thread.
struct AccessSnapshot: Sendable {
    let peer: Peer
    let policy: AccessPolicy
    let isAdmin: Bool

    func canRead(_ collection: String?) -> Bool {
        if isAdmin { return true }
        guard let collection else { return policy.bestRole(of: peer) >= .read }
        return policy.role(of: peer, for: collection) >= .read
    }
}

enum AccessControl {
    /// The pseudo-collection file ops act on: `access.uid.N = write $files` lets N put and delete
    /// files, `read $files` lets it get, read and list them; `*` covers it too.
    static let filesCollection = FileName.collection

    /// Why the peer may not do the request, or nil if it may. Each op needs its table role on
    /// every collection it names; ops that name none (the log, stats, listings) need the role on
    /// some collection and show only what it may read, except `verify` and `backup`, which need
    /// admin on every collection.
    static func denial(_ request: Request, _ access: AccessView, reader: Store.Reader) -> ProtocolError? {
        let needed = request.spec.role
        guard needed > .any, !access.isAdmin else { return nil }
        // The common case, an op on one collection the peer may use: no list of names to build.
        if let collection = Self.collection(of: request.operation),
            access.role(for: collection).rawValue >= needed.rawValue
        {
            return nil
        }
        let collections = Self.collections(of: request.operation, reader: reader)
        /// The peer's role on the collection, or, for an op on every collection, what it holds on some.
        func held(_ collection: String?) -> String {
            let role = access.role(for: collection)
            guard collection == nil, access.bestRole > role else { return role.description }
            return "\(access.bestRole) on some collections only"
        }
        func refuse(_ collection: String?) -> ProtocolError {
            let peer = access.peer
            let who = peer.userName.map { "\($0) (uid \(peer.uid))" } ?? "uid \(peer.uid)"
            let what = collection.map { "on collection \($0)" } ?? "on every collection"
            return ProtocolError(
                .forbidden, "\(request.spec.name) needs role \(needed) \(what); \(who) has \(held(collection))",
                details: [("op", quoted(request.spec.name)), ("role", quoted(needed.description))]
                    + (collection.map { [("collection", quoted($0))] } ?? []))
        }
        guard let collections else {
            if needed == .admin { return access.role(for: nil) >= .admin ? nil : refuse(nil) }
            return access.bestRole.rawValue >= needed.rawValue ? nil : refuse(nil)
        }
        for collection in collections where access.role(for: collection).rawValue < needed.rawValue {
            return refuse(collection)
        }
        return nil
    }

    /// `denial` for a plain `get`, left in its line: a `String` of its collection for a peer whose
    /// role is looked up, a `Request` only for a refusal.
    static func denial(_ get: PlainGet, _ access: AccessView, reader: Store.Reader) -> ProtocolError? {
        let needed = PlainGet.spec.role
        guard needed > .any, !access.isAdmin else { return nil }
        if access.role(for: String(decoding: get.collection, as: UTF8.self)).rawValue >= needed.rawValue { return nil }
        return denial(get.request, access, reader: reader)
    }

    private static func quoted(_ text: String) -> String { String(decoding: JSONWriterBox.string(text), as: UTF8.self) }

    /// The one collection that a request on a single collection names, found without a lookup;
    /// nil for every other request (`collections(of:)` says which those name).
    static func collection(of operation: Request.Operation) -> String? {
        switch operation {
        case .write(let write):
            switch write.command {
            case .create(let collection, _, _), .update(let collection, _, _, _, _), .delete(let collection, _, _):
                return collection
            case .putFile, .deleteFile: return filesCollection
            default: return nil
            }
        case .upload, .read(.fileGet), .read(.fileRead), .read(.fileList), .read(.fileOpen), .read(.fileOrphans):
            return filesCollection
        case .read(.get(let collection, _, _, _)), .read(.history(let collection, _, _, _)): return collection
        case .read(.list(let query)), .read(.count(let query)), .stream(.live(let query, _)):
            switch query.source {
            case .collection(let collection), .links(let collection, _, _), .backlinks(_, _, let collection, _):
                return collection
            case .view: return nil
            }
        default: return nil
        }
    }

    /// The collections a request names; nil for those that name none.
    static func collections(of operation: Request.Operation, reader: Store.Reader) -> [String]? {
        if let collection = collection(of: operation) { return [collection] }
        switch operation {
        case .write(let write):
            switch write.command {
            case .create, .update, .delete, .putFile, .deleteFile: return nil  // answered by collection(of:)
            case .defineView(let definition): return [definition.collection]
            // A view not found names no collection: dropping it needs admin on every collection,
            // as it may be defined on any by the time the writer drops it.
            case .dropView(let name): return viewCollection(name, reader).map { [$0] }
            case .defineSchema(let schema): return [schema.collection]
            case .dropSchema(let collection): return [collection]
            case .batch(let operations, _):
                return Array(
                    Set(
                        operations.compactMap { operation -> String? in
                            switch operation.command {
                            case .create(let collection, _, _), .update(let collection, _, _, _, _),
                                .delete(let collection, _, _):
                                return collection
                            default: return nil
                            }
                        })
                ).sorted()
            }
        case .read(let read):
            switch read {
            case .schema(let collection): return [collection]
            case .list(let query), .count(let query):
                // Only a view is left: collection(of:) answered the other sources.
                guard case .view(let name) = query.source else { return nil }
                return viewCollection(name, reader).map { [$0] } ?? []
            // Answered by collection(of:).
            case .get, .history, .fileGet, .fileRead, .fileList, .fileOpen, .fileOrphans: return nil
            case .hello, .events, .stats, .viewList, .schemaList, .verify, .backup, .metrics: return nil
            }
        case .stream(.live(let query, _)):
            guard case .view(let name) = query.source else { return nil }
            return viewCollection(name, reader).map { [$0] } ?? []
        case .stream(.watch(_, let collection?)): return [collection]
        case .upload, .stream: return nil
        }
    }

    private static func viewCollection(_ name: String, _ reader: Store.Reader) -> String? {
        try? reader.read { snapshot in try snapshot.views().first { $0.definition.name == name }?.definition.collection
        }
    }
}

/// JSON text of a string, for error details.
enum JSONWriterBox {
    static func string(_ text: String) -> [UInt8] {
        var writer = FolioJSON.JSONWriter(capacity: text.utf8.count + 2)
        writer.write(text)
        return writer.bytes
    }
}
