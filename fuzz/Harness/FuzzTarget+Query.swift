import FolioJSON
import FolioModel

extension FuzzTarget {
    /// The bytes as JSON, read as a `where`, as a `sort`, and (an array) as values to order. A `where`
    /// valid in one key order is valid in any; a sort order reads back from its own JSON; the sort
    /// keys of two values compare (as bytes) as the values do; and an array's first value, as the
    /// operand of a `where` that fixes a field, matches each other value exactly when their keys are
    /// equal (`checkEquality`).
    static func query(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard let json = try? JSONParser.parse(bytes) else { return nil }
        let object = StoredObject(
            collection: "c", id: "x", version: 1, createdAt: Timestamp(milliseconds: 0),
            updatedAt: Timestamp(milliseconds: 0),
            data: json.objectValue ?? JSONObject())

        if let (whereJSON, filter) = try? Filter.parse(optional: json) {
            guard (try? Filter.parse(optional: json.canonical)) != nil else {
                return "where \(json) is valid, but not with its keys sorted"
            }
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
            if let operand = elements.first {
                for candidate in elements.dropFirst().prefix(8) {
                    if let failure = checkEquality(operand, candidate) { return failure }
                }
            }
        }
        return nil
    }

    /// A `where` that fixes a field by equality matches an object exactly when the field's sort key
    /// is the operand's, as a list served from a view's keys would: read against the object (a
    /// scan) by `{f: v}`, `$eq`, `$in` and `$contains` alike, and not by `$ne` and `$nin`.
    private static func checkEquality(_ operand: JSON, _ candidate: JSON) -> String? {
        var operandKey: [UInt8] = []
        var candidateKey: [UInt8] = []
        SortKey.append(Value(operand), descending: false, to: &operandKey)
        SortKey.append(Value(candidate), descending: false, to: &candidateKey)
        let equal = operandKey == candidateKey
        func holding(_ value: JSON) -> StoredObject {
            StoredObject(
                collection: "c", id: "x", version: 1, createdAt: Timestamp(milliseconds: 0),
                updatedAt: Timestamp(milliseconds: 0),
                data: ["f": value])
        }
        let forms: [(JSON, Bool, StoredObject)] = [
            (["f": operand], equal, holding(candidate)),
            (["f": ["$eq": operand]], equal, holding(candidate)),
            (["f": ["$in": [operand]]], equal, holding(candidate)),
            (["f": ["$contains": operand]], equal, holding([candidate])),
            (["f": ["$ne": operand]], !equal, holding(candidate)),
            (["f": ["$nin": [operand]]], !equal, holding(candidate)),
        ]
        for (whereJSON, expected, object) in forms {
            // An operand a filter does not take (an object of unknown operators) is not a case.
            guard let filter = try? Filter.parse(optional: whereJSON).filter else { continue }
            if filter.matches(object) != expected {
                return
                    "where \(whereJSON) \(expected ? "does not match" : "matches") \(JSON.object(object.data)), whose key is \(equal ? "" : "not ")the operand's"
            }
        }
        return nil
    }

    private static func checkOrder(_ a: Value, _ b: Value) -> String? {
        let order = Value.compare(a, b)
        if Value.compare(b, a) != -order {
            return "compare(\(a), \(b)) is \(order) but compare(\(b), \(a)) is \(Value.compare(b, a))"
        }
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
