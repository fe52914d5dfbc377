import FolioJSON
import FolioProtocol

/// A live query's window on the client: the records in the query's order, kept equal to the
/// server's by applying its change lines (`/work/notes/live-queries.md`).
struct LiveWindow<Record: FolioRecord> {
    private(set) var items: [(id: String, record: Record)] = []
    /// How many records match the query in all.
    private(set) var total = 0

    var records: [Record] { items.map(\.record) }
    var ids: [String] { items.map(\.id) }

    /// A whole new window (a first answer, or a resume the server could not honour).
    mutating func replace(with objects: [JSON], total: Int) throws {
        items = try objects.map { try Self.item($0) }
        self.total = total
    }

    /// Applies a change as the protocol says (`LiveChangeLine`).
    mutating func apply(_ change: JSONObject) throws -> LiveChange {
        let line: LiveChangeLine
        do { line = try LiveChangeLine(parsing: .object(change)) } catch { throw FolioError.decoding(error.message) }
        do {
            try line.apply(to: &items) { try Self.item($0) }
        } catch let error as ProtocolError {
            throw FolioError.decoding(error.message)
        }
        total = Int(line.total)
        return LiveChange(
            removed: line.removed.map { LiveChange.Removal(index: $0.index, id: $0.id) },
            inserted: line.inserted.map(\.index),
            updated: line.updated.map(\.index),
            moved: line.moved.map { LiveChange.Move(from: $0.from, to: $0.to, id: $0.id) })
    }

    private static func item(_ object: JSON) throws -> (id: String, record: Record) {
        guard case .object(let fields) = object, let id = fields["id"]?.stringValue else {
            throw FolioError.decoding("a live query item without an id")
        }
        return (id, try RecordDecoder.decode(Record.self, from: object))
    }
}
