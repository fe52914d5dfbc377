import FolioJSON
import FolioModel

extension FuzzTarget {
    /// The bytes as JSON, read as a `where`, as a `sort`, and (an array) as values to order. A `where`
    /// valid in one key order is valid in any; a sort order reads back from its own JSON; and the sort
    /// keys of two values compare (as bytes) as the values do.
    static func query(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard let json = try? JSONParser.parse(bytes) else { return nil }
        let object = StoredObject(
            collection: "c", id: "x", version: 1, createdAt: Timestamp(milliseconds: 0), updatedAt: Timestamp(milliseconds: 0),
            data: json.objectValue ?? JSONObject())

        if let (whereJSON, filter) = try? Filter.parse(optional: json) {
            guard (try? Filter.parse(optional: json.canonical)) != nil else { return "where \(json) is valid, but not with its keys sorted" }
            _ = filter?.matches(object)
            guard let query = try? Query(source: .collection("c"), whereJSON: whereJSON) else {
                return "where \(json) parses as a filter but not in a query"
            }
            _ = query.fingerprint
        }

        if let order = try? SortOrder(parsing: json) {
            guard let again = try? SortOrder(parsing: order.json), again == order else {
                return "sort \(json) is read back from \(order.json) as another order"
            }
            _ = order.key(for: object, id: "x")
        }

        if case .array(let elements) = json {
            let values = elements.prefix(16).map(Value.init)
            for (i, a) in values.enumerated() {
                for b in values[(i + 1)...] {
                    if let failure = checkOrder(a, b) { return failure }
                }
            }
        }
        return nil
    }

    private static func checkOrder(_ a: Value, _ b: Value) -> String? {
        let order = Value.compare(a, b)
        if Value.compare(b, a) != -order { return "compare(\(a), \(b)) is \(order) but compare(\(b), \(a)) is \(Value.compare(b, a))" }
        for descending in [false, true] {
            var keyA: [UInt8] = []
            var keyB: [UInt8] = []
            SortKey.append(a, descending: descending, to: &keyA)
            SortKey.append(b, descending: descending, to: &keyB)
            let keyOrder = keyA.lexicographicallyPrecedes(keyB) ? -1 : (keyA == keyB ? 0 : 1)
            if keyOrder != (descending ? -order : order) {
                return "\(a) and \(b) compare as \(order), their sort keys (descending: \(descending)) as \(keyOrder)"
            }
        }
        return nil
    }
}
