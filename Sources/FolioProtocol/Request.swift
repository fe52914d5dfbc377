import FolioJSON
import FolioModel

/// A decoded request line: what to do, the table entry of its op, and the tag to echo. A class, so
/// that handing a request on (decoder, queue, handler) costs a reference count, not a copy of every
/// payload: a get's copies of the value had cost 1,800 instructions of its 10,500.
public final class Request: Sendable {
    /// The client's correlation tag; nil when absent.
    public let tag: Tag?
    public let operation: Operation
    /// The op's entry in `OperationTable`: its name, kind and cost class.
    public let spec: OperationSpec
    /// A read waits until the server has applied this sequence (`minSeq`): a client reads its own
    /// writes on any node of a cluster.
    public let minSeq: UInt64?

    public init(tag: Tag?, operation: Operation, spec: OperationSpec, minSeq: UInt64? = nil) {
        self.tag = tag
        self.operation = operation
        self.spec = spec
        self.minSeq = minSeq
    }
}

extension Request {
    /// What a request asks for, by kind: the case says who carries it out.
    public enum Operation: Sendable {
        /// Executed by the writer, in a group commit.
        case write(WriteRequest)
        /// Answered from a snapshot, on the event loop or a worker as the op's cost class says.
        case read(ReadOperation)
        /// Starts or ends a stream of lines on the connection.
        case stream(StreamOperation)
        /// A file op run on a worker in request order; `file.put` and `file.commit` then go to the
        /// writer.
        case upload(UploadOperation)
    }

    public enum ReadOperation: Sendable {
        case hello
        case get(collection: String, id: String, at: PointInTime?, include: [IncludePath])
        case list(Query)
        case count(Query)
        case history(collection: String, id: String, after: UInt64, limit: Int)
        case events(after: UInt64, limit: Int)
        case stats
        case viewList
        case verify
        case backup(directory: String)
        case schema(collection: String)
        case schemaList
        case metrics
        /// `referrers`: list at most this many of the records that refer to the file; nil: none.
        case fileGet(name: String, referrers: Int?)
        /// At most `FileRead.maxLength` bytes from `offset`.
        case fileRead(FileRead.Source, offset: UInt64, length: Int)
        case fileList(prefix: String, after: String?, limit: Int)
        /// Files no record refers to, bound at least `olderThan` seconds ago.
        case fileOrphans(prefix: String, after: String?, olderThan: UInt64, limit: Int)
        /// `file.read {fd: true}`: a read-only descriptor to the content, passed with the answer.
        case fileOpen(name: String)
    }

    public enum StreamOperation: Sendable {
        case watch(after: UInt64?, collection: String?)
        /// A live query: its first page, then a change line per commit that changes it; resumed
        /// from the window at `resumeAfter` when given.
        case live(Query, resumeAfter: UInt64?)
        case unwatch(watch: JSON)
    }
}

public enum FileRead {
    /// What `file.read` reads: the content bound to a name, or a content by its SHA-256 (what
    /// `folio export --with-files` reads for the events that name it).
    public enum Source: Sendable, Equatable {
        case name(String)
        case content(sha256: String)
    }

    /// The most content one `file.read` answers: 512 KiB, whose base64 fits the default line.
    public static let maxLength = 512 << 10
}
