import FolioJSON

/// The `change` of a live query's change line (PROTOCOL.md §5.14), read, and applied to a client's
/// window of any kind of item: one implementation for the CLI and the SDKs built on this package.
public struct LiveChangeLine: Sendable {
    public let sequence: UInt64
    /// Indices in the previous window.
    public let removed: [(index: Int, id: String)]
    /// Indices in the new window.
    public let inserted: [(index: Int, object: JSON)]
    /// Indices in the new window.
    public let updated: [(index: Int, object: JSON)]
    /// From an index in the previous window to one in the new.
    public let moved: [(from: Int, to: Int, id: String)]
    public let total: Int64

    public init(parsing change: JSON) throws(ProtocolError) {
        func entries(_ key: String) throws(ProtocolError) -> [JSONObject] {
            guard case .array(let values)? = change.objectValue?[key] else { throw Self.malformed("without \(key)") }
            var objects: [JSONObject] = []
            for value in values {
                guard case .object(let entry) = value else {
                    throw Self.malformed("whose \(key) holds \(value.kindDescription)")
                }
                objects.append(entry)
            }
            return objects
        }
        func index(_ entry: JSONObject, _ key: String) throws(ProtocolError) -> Int {
            guard let value = entry[key]?.integerValue, value >= 0 else {
                throw Self.malformed("with an entry without \(key)")
            }
            return Int(value)
        }
        func object(_ entry: JSONObject) throws(ProtocolError) -> JSON {
            guard let object = entry["object"] else { throw Self.malformed("with an entry without object") }
            return object
        }
        guard let sequence = change.objectValue?["seq"]?.integerValue,
            let total = change.objectValue?["total"]?.integerValue
        else {
            throw Self.malformed("without seq or total")
        }
        self.sequence = UInt64(sequence)
        self.total = total
        var removed: [(Int, String)] = []
        for entry in try entries("removed") {
            removed.append((try index(entry, "index"), entry["id"]?.stringValue ?? ""))
        }
        var inserted: [(Int, JSON)] = []
        for entry in try entries("inserted") { inserted.append((try index(entry, "index"), try object(entry))) }
        var updated: [(Int, JSON)] = []
        for entry in try entries("updated") { updated.append((try index(entry, "index"), try object(entry))) }
        var moved: [(Int, Int, String)] = []
        for entry in try entries("moved") {
            moved.append((try index(entry, "from"), try index(entry, "to"), entry["id"]?.stringValue ?? ""))
        }
        (self.removed, self.inserted, self.updated, self.moved) = (removed, inserted, updated, moved)
    }

    /// Turns the previous window into the new one: removals (`removed`, `moved` from) from the
    /// highest index down, insertions (`inserted`, made with `make`, and the moved items) from the
    /// lowest up, then updates. Throws, changing nothing, if an index falls outside the window.
    public func apply<Item>(to window: inout [Item], make: (JSON) throws -> Item) throws {
        var items = window
        var taken: [Int: Item] = [:]
        for move in moved {
            guard items.indices.contains(move.from) else { throw Self.outside("moved", move.from, items.count) }
            taken[move.from] = items[move.from]
        }
        var removals = removed.map(\.index) + moved.map(\.from)
        removals.sort(by: >)
        for position in removals {
            guard items.indices.contains(position) else { throw Self.outside("removed", position, items.count) }
            items.remove(at: position)
        }
        var insertions: [(Int, Item)] = []
        for item in inserted { insertions.append((item.index, try make(item.object))) }
        for move in moved { insertions.append((move.to, taken[move.from]!)) }
        for (position, item) in insertions.sorted(by: { $0.0 < $1.0 }) {
            guard position <= items.count else { throw Self.outside("inserted", position, items.count) }
            items.insert(item, at: position)
        }
        for item in updated {
            guard items.indices.contains(item.index) else { throw Self.outside("updated", item.index, items.count) }
            items[item.index] = try make(item.object)
        }
        window = items
    }

    private static func malformed(_ what: String) -> ProtocolError {
        ProtocolError(.internal, "a live query change \(what)")
    }

    private static func outside(_ what: String, _ index: Int, _ count: Int) -> ProtocolError {
        ProtocolError(.internal, "a live query change's \(what) index \(index) is outside the window of \(count)")
    }
}
