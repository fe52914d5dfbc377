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
    }

    public let name: String
    public let decoder: Decoder

    public init(_ name: String, _ decoder: Decoder) {
        self.name = name
        self.decoder = decoder
    }

    public var kind: Kind {
        switch decoder {
        case .write: return .write
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
        }
    }
}

/// Every op of protocol version 1, in the order PROTOCOL.md lists them.
public enum OperationTable {
    public static let all: [OperationSpec] = [
        OperationSpec("hello", .read(.inline) { _ in .hello }),
        OperationSpec("create", .write(keyed: true, RequestDecoder.create)),
        // With include, up to Snapshot.includeLimit objects more: then on a worker.
        OperationSpec("get", .read(.byPlan, RequestDecoder.get)),
        OperationSpec("update", .write(keyed: true, RequestDecoder.update)),
        OperationSpec("delete", .write(keyed: true, RequestDecoder.delete)),
        OperationSpec("batch", .write(keyed: true, RequestDecoder.batch)),
        OperationSpec("list", .read(.byPlan) { .list(try RequestDecoder.query(&$0, paging: true)) }),
        OperationSpec("count", .read(.byPlan) { .count(try RequestDecoder.query(&$0, paging: false)) }),
        OperationSpec("links", .read(.byPlan) { .list(try RequestDecoder.query(&$0, paging: true, source: .links)) }),
        OperationSpec("backlinks", .read(.byPlan) { .list(try RequestDecoder.query(&$0, paging: true, source: .backlinks)) }),
        OperationSpec("history", .read(.inline, RequestDecoder.history)),
        OperationSpec("events", .read(.inline, RequestDecoder.events)),
        // Counts per collection and, when the cached digest is stale, a digest of everything.
        OperationSpec("stats", .read(.worker) { _ in .stats }),
        OperationSpec("view.define", .write(keyed: false, RequestDecoder.defineView)),
        OperationSpec("view.drop", .write(keyed: false, RequestDecoder.dropView)),
        // One entry per view, and views are data.
        OperationSpec("view.list", .read(.worker) { _ in .viewList }),
        OperationSpec("watch", .stream(RequestDecoder.watch)),
        OperationSpec("unwatch", .stream(RequestDecoder.unwatch)),
        OperationSpec("verify", .read(.worker) { _ in .verify }),
        OperationSpec("backup", .read(.worker, RequestDecoder.backup)),
        OperationSpec("schema.define", .write(keyed: false, RequestDecoder.defineSchema)),
        OperationSpec("schema.drop", .write(keyed: false) { .dropSchema(collection: try $0.collection()) }),
        OperationSpec("schema.get", .read(.inline) { .schema(collection: try $0.collection()) }),
        OperationSpec("schema.list", .read(.worker) { _ in .schemaList }),
    ]

    public static let names: [String] = all.map(\.name)

    static let byName: [String: OperationSpec] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    public static func spec(named name: String) -> OperationSpec? { byName[name] }
}
