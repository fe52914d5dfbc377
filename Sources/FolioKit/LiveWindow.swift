import FolioJSON

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

    /// Applies a change exactly as the protocol says: removals (and moves' old places, indices into
    /// the previous window) from the highest index down, then insertions (and moves' new places,
    /// indices into the new window) from the lowest up, then updates in place.
    mutating func apply(_ change: JSONObject) throws -> LiveChange {
        func entries(_ key: String) throws -> [JSONObject] {
            guard case .array(let values)? = change[key] else {
                throw FolioError.decoding("a live query change without \(key)")
            }
            return try values.map {
                guard case .object(let entry) = $0 else {
                    throw FolioError.decoding("a live query change's \(key) holds \($0)")
                }
                return entry
            }
        }
        func index(_ entry: JSONObject, _ key: String) throws -> Int {
            guard let value = entry[key]?.integerValue else {
                throw FolioError.decoding("a live query change entry without \(key)")
            }
            return Int(value)
        }
        func object(_ entry: JSONObject) throws -> (id: String, record: Record) {
            guard let object = entry["object"] else {
                throw FolioError.decoding("a live query change entry without object")
            }
            return try Self.item(object)
        }
        let removed = try entries("removed").map {
            LiveChange.Removal(index: try index($0, "index"), id: $0["id"]?.stringValue ?? "")
        }
        let moved = try entries("moved").map {
            LiveChange.Move(from: try index($0, "from"), to: try index($0, "to"), id: $0["id"]?.stringValue ?? "")
        }
        let inserted = try entries("inserted").map { (index: try index($0, "index"), item: try object($0)) }
        let updated = try entries("updated").map { (index: try index($0, "index"), item: try object($0)) }

        var window = items
        var movedItems: [String: (id: String, record: Record)] = [:]
        for move in moved {
            guard window.indices.contains(move.from) else { throw outOfRange("moved.from", move.from) }
            movedItems[move.id] = window[move.from]
        }
        for place in (removed.map(\.index) + moved.map(\.from)).sorted(by: >) {
            guard window.indices.contains(place) else { throw outOfRange("removed", place) }
            window.remove(at: place)
        }
        var insertions = inserted
        for move in moved {
            guard let item = movedItems[move.id] else {
                throw FolioError.decoding("a live query moved \(move.id), not in its window")
            }
            insertions.append((move.to, item))
        }
        for insertion in insertions.sorted(by: { $0.index < $1.index }) {
            guard (0...window.count).contains(insertion.index) else { throw outOfRange("inserted", insertion.index) }
            window.insert(insertion.item, at: insertion.index)
        }
        for update in updated {
            guard window.indices.contains(update.index) else { throw outOfRange("updated", update.index) }
            window[update.index] = update.item
        }
        items = window
        if let newTotal = change["total"]?.integerValue { total = Int(newTotal) }
        return LiveChange(
            removed: removed, inserted: inserted.map(\.index), updated: updated.map(\.index), moved: moved)
    }

    private func outOfRange(_ what: String, _ index: Int) -> FolioError {
        .decoding("a live query change's \(what) index \(index) is outside the window of \(items.count)")
    }

    private static func item(_ object: JSON) throws -> (id: String, record: Record) {
        guard case .object(let fields) = object, let id = fields["id"]?.stringValue else {
            throw FolioError.decoding("a live query item without an id")
        }
        return (id, try RecordDecoder.decode(Record.self, from: object))
    }
}
