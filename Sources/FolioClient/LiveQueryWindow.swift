import FolioJSON

/// A client's copy of a live query's window (`watch {query}`): set from the first answer, moved by
/// each change line as PROTOCOL.md §5.14 says. `sequence` is where to resume from.
public struct LiveQueryWindow: Sendable {
    public private(set) var items: [JSON] = []
    public private(set) var total: Int64 = 0
    public private(set) var sequence: UInt64 = 0

    public init() {}

    /// Takes the result of the `watch` answer: a first page (`items`), or a resumed window's change.
    public mutating func start(with result: JSON) throws(ClientError) {
        guard let seq = result["seq"]?.integerValue else { throw ClientError.malformedResponse("a live query's answer without seq") }
        if case .array(let page)? = result["items"] {
            items = page
            total = result["total"]?.integerValue ?? Int64(page.count)
        } else if let change = result["change"] {
            try apply(change)
        }
        sequence = UInt64(seq)
    }

    /// Applies a change: removals (removed, moved from) from the highest index down, insertions
    /// (inserted, moved to) from the lowest up, then updates.
    public mutating func apply(_ change: JSON) throws(ClientError) {
        func index(_ value: JSON?, _ field: String) throws(ClientError) -> Int {
            guard let number = value?[field]?.integerValue, number >= 0 else { throw ClientError.malformedResponse("a change without \(field)") }
            return Int(number)
        }
        guard case .array(let removed)? = change["removed"], case .array(let inserted)? = change["inserted"],
            case .array(let updated)? = change["updated"], case .array(let moved)? = change["moved"],
            let seq = change["seq"]?.integerValue, let newTotal = change["total"]?.integerValue
        else { throw ClientError.malformedResponse("a change without its four lists, seq and total") }
        var removals: [Int] = []
        for item in removed { removals.append(try index(item, "index")) }
        var taken: [String: JSON] = [:]
        for move in moved {
            let from = try index(move, "from")
            guard from < items.count, let id = move["id"]?.stringValue else { throw ClientError.malformedResponse("a move outside the window") }
            taken[id] = items[from]
            removals.append(from)
        }
        for position in removals.sorted(by: >) {
            guard position < items.count else { throw ClientError.malformedResponse("a removal outside the window") }
            items.remove(at: position)
        }
        var insertions: [(Int, JSON)] = []
        for item in inserted {
            guard let object = item["object"] else { throw ClientError.malformedResponse("an insertion without its object") }
            insertions.append((try index(item, "index"), object))
        }
        for move in moved {
            guard let id = move["id"]?.stringValue, let object = taken[id] else { throw ClientError.malformedResponse("a move without its item") }
            insertions.append((try index(move, "to"), object))
        }
        for (position, object) in insertions.sorted(by: { $0.0 < $1.0 }) {
            guard position <= items.count else { throw ClientError.malformedResponse("an insertion outside the window") }
            items.insert(object, at: position)
        }
        for item in updated {
            let position = try index(item, "index")
            guard position < items.count, let object = item["object"] else { throw ClientError.malformedResponse("an update outside the window") }
            items[position] = object
        }
        total = newTotal
        sequence = UInt64(seq)
    }
}

extension JSON {
    fileprivate subscript(key: String) -> JSON? { objectValue?[key] }
}
