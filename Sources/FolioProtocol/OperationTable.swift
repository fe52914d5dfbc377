import FolioJSON
import FolioModel

/// One op of the protocol, declared once: its name, and a decoder whose kind says who runs it and,
/// for reads, at what cost. The dispatcher, the worker pool and the error listing known ops all
/// read this table; the server's handlers are exhaustive switches over the decoded operations.
public struct OperationSpec: Sendable {
    public enum Kind: String, Sendable {
        case read, write, stream
    }

    /// Where a read runs.
    public enum Cost: String, Sendable {
        /// Bounded work, independent of how much is stored (O(log n) seeks and one page at most):
        /// answered on the event loop.
        case inline
        /// Work that grows with stored data: always on a worker thread, never on an event loop.
        case worker
        /// Inline when an index answers (O(log n + page)); on a worker when the query must scan a
        /// collection.
        case byPlan
    }

    public enum Decoder: Sendable {
        /// `keyed`: the op takes a `requestKey`.
        case write(keyed: Bool, @Sendable (inout Fields) throws -> Command)
        case read(Cost, @Sendable (inout Fields) throws -> Request.ReadOperation)
        case stream(@Sendable (inout Fields) throws -> Request.StreamOperation)
        /// A file op whose work runs on a worker, in request order (`file.put`, the pieces of an
        /// upload): see `UploadOperation`.
        case upload(@Sendable (inout Fields) throws -> UploadOperation)
    }

    /// What a peer needs to be let do the op, per collection: `read` (see), `write` (change objects),
    /// `admin` (define views and schemas, verify, back up, see everything); `any`: every peer let in.
    public enum Role: Int, Sendable, Comparable, CustomStringConvertible {
        case any = 0, read, write, admin

        public static func < (lhs: Role, rhs: Role) -> Bool { lhs.rawValue < rhs.rawValue }

        public var description: String {
            switch self {
            case .any: return "any"
            case .read: return "read"
            case .write: return "write"
            case .admin: return "admin"
            }
        }
    }

    public let name: String
    public let role: Role
    public let decoder: Decoder
    /// The op's position in `OperationTable.all` (metrics count by it without hashing the name).
    public fileprivate(set) var index = 0

    public init(_ name: String, _ role: Role, _ decoder: Decoder) {
        self.name = name
        self.role = role
        self.decoder = decoder
    }

    public var kind: Kind {
        switch decoder {
        case .write, .upload: return .write
        case .read: return .read
        case .stream: return .stream
        }
    }

    /// Where a read runs; nil for writes (the writer thread) and streams (the connection's loop, in
    /// bounded chunks).
    public var cost: Cost? {
        if case .read(let cost, _) = decoder { return cost }
        return nil
    }

    func decode(_ fields: inout Fields) throws -> Request.Operation {
        switch decoder {
        case .write(let keyed, let decode):
            let command = try decode(&fields)
            guard keyed else { return .write(WriteRequest(command: command)) }
            return .write(WriteRequest(command: command, requestKey: try fields.requestKey()))
        case .read(_, let decode): return .read(try decode(&fields))
        case .stream(let decode): return .stream(try decode(&fields))
        case .upload(let decode): return .upload(try decode(&fields))
        }
    }
}

/// Every op of protocol version 1, in the order PROTOCOL.md lists them.
public enum OperationTable {
    public static let all: [OperationSpec] = numbered([
        OperationSpec("hello", .any, .read(.inline) { _ in .hello }),
        OperationSpec("create", .write, .write(keyed: true, RequestDecoder.create)),
        // With include, up to Snapshot.includeLimit objects more: then on a worker.
        OperationSpec("get", .read, .read(.byPlan, RequestDecoder.get)),
        OperationSpec("update", .write, .write(keyed: true, RequestDecoder.update)),
        OperationSpec("delete", .write, .write(keyed: true, RequestDecoder.delete)),
        OperationSpec("batch", .write, .write(keyed: true, RequestDecoder.batch)),
        OperationSpec("list", .read, .read(.byPlan) { .list(try RequestDecoder.query(&$0, paging: true)) }),
        OperationSpec("count", .read, .read(.byPlan) { .count(try RequestDecoder.query(&$0, paging: false)) }),
        OperationSpec(
            "links", .read, .read(.byPlan) { .list(try RequestDecoder.query(&$0, paging: true, source: .links)) }),
        OperationSpec(
            "backlinks", .read,
            .read(.byPlan) { .list(try RequestDecoder.query(&$0, paging: true, source: .backlinks)) }),
        OperationSpec("history", .read, .read(.inline, RequestDecoder.history)),
        OperationSpec("events", .read, .read(.inline, RequestDecoder.events)),
        // Counts per collection and, when the cached digest is stale, a digest of everything.
        OperationSpec("stats", .read, .read(.worker) { _ in .stats }),
        OperationSpec("view.define", .admin, .write(keyed: false, RequestDecoder.defineView)),
        OperationSpec("view.drop", .admin, .write(keyed: false, RequestDecoder.dropView)),
        // One entry per view, and views are data.
        OperationSpec("view.list", .read, .read(.worker) { _ in .viewList }),
        OperationSpec("watch", .read, .stream(RequestDecoder.watch)),
        OperationSpec("unwatch", .any, .stream(RequestDecoder.unwatch)),
        OperationSpec("verify", .admin, .read(.worker) { _ in .verify }),
        OperationSpec("backup", .admin, .read(.worker, RequestDecoder.backup)),
        OperationSpec("schema.define", .admin, .write(keyed: false, RequestDecoder.defineSchema)),
        OperationSpec("schema.drop", .admin, .write(keyed: false) { .dropSchema(collection: try $0.collection()) }),
        OperationSpec("schema.get", .read, .read(.inline) { .schema(collection: try $0.collection()) }),
        OperationSpec("schema.list", .read, .read(.worker) { _ in .schemaList }),
        // Counters of the daemon, in Prometheus text.
        OperationSpec("metrics", .admin, .read(.inline) { _ in .metrics }),
        // Files act on the pseudo-collection $files. Decoding, hashing and storing the content run
        // on a worker, then the writer binds the name.
        OperationSpec("file.put", .write, .upload(RequestDecoder.filePut)),
        // With referrers, one seek per (collection, field) group listed: O((limit + 1) log n).
        OperationSpec("file.get", .read, .read(.inline, RequestDecoder.fileGet)),
        // Reads up to 512 KiB of a blob file.
        OperationSpec("file.read", .read, .read(.worker, RequestDecoder.fileRead)),
        OperationSpec("file.list", .read, .read(.inline, RequestDecoder.fileList)),
        OperationSpec("file.delete", .write, .write(keyed: false, RequestDecoder.fileDelete)),
        // Examines up to 10,000 names, one seek of the reference index each.
        OperationSpec("file.orphans", .read, .read(.worker, RequestDecoder.fileOrphans)),
        // An upload in pieces, each within the line limit: begun, written in any order, committed.
        OperationSpec("file.begin", .write, .upload(RequestDecoder.fileBegin)),
        OperationSpec("file.write", .write, .upload(RequestDecoder.fileWrite)),
        OperationSpec("file.commit", .write, .upload { .commit(upload: try $0.uploadID()) }),
        OperationSpec("file.abort", .write, .upload { .abort(upload: try $0.uploadID()) }),
    ])

    private static func numbered(_ specs: [OperationSpec]) -> [OperationSpec] {
        specs.enumerated().map { position, spec in
            var spec = spec
            spec.index = position
            return spec
        }
    }

    public static let names: [String] = all.map(\.name)

    static let byName: [String: OperationSpec] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    public static func spec(named name: String) -> OperationSpec? { byName[name] }
}
