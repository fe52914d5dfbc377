import FolioJSON
import FolioModel

/// What a write did: the events it appended, in order (its own and those its delete rules made),
/// and the result to answer with.
public struct WriteOutcome: Sendable {
    public var appended: [StoreWriter.Applied]
    public var result: WriteResult
    /// The request key was used before: the result is the first request's, and nothing was written.
    public var replayed: Bool
    /// For a replayed request: the last event the first one appended.
    var replayedThrough: UInt64? = nil

    /// The last event of the write (of the first request, when replayed): what a client passes as
    /// `minSeq` to read it on another node.
    public var lastSequence: UInt64? { replayed ? replayedThrough : appended.last?.event.sequence }
}

/// The result of a write, as the client is answered.
public indirect enum WriteResult: Sendable {
    /// A created or updated object, in its wire form.
    case object(wire: [UInt8])
    case deleted(id: String, version: UInt64)
    case view(ViewDefinition, count: Int)
    case viewDropped(name: String)
    case schema(Schema)
    case schemaDropped(collection: String)
    case file(FileRecord)
    case fileDeleted(name: String)
    case batch([BatchItem])

    public enum BatchItem: Sendable {
        case success(WriteResult)
        case failure(StoreError)
    }
}
