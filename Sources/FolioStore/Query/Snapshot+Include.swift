import FolioJSON
import FolioModel

extension Snapshot {
    /// Objects one answer may include at most; references beyond stay references, and the answer
    /// says `includeTruncated`.
    public static let includeLimit = 1000

    /// Replaces, in the page's items, the references at each `include` path by their targets (in
    /// the object's wire form, read from this snapshot) and the `{"$file"}` values by the file's
    /// metadata, or marks them `"$missing": true`.
    func include(_ paths: [IncludePath], in result: inout QueryResult, readable: ((String) -> Bool)? = nil) throws {
        guard case .array(let items) = try JSONParser.parse(Array("[".utf8) + result.items + Array("]".utf8)) else {
            throw StoreError.corrupted("a page of items that is not JSON")
        }
        var budget = Self.includeLimit
        var truncated = false
        var writer = JSONWriter(capacity: result.items.count * 2)
        for (index, item) in items.enumerated() {
            var item = item
            for path in paths {
                item = try including(
                    path.segments[...], in: item, hops: 0, budget: &budget, truncated: &truncated, readable: readable)
            }
            if index > 0 { writer.bytes.append(UInt8(ascii: ",")) }
            writer.write(item)
        }
        result.items = writer.bytes
        result.includeTruncated = truncated
    }

    /// The object as a `get` answers it, with `include` applied.
    public func objectIncluding(
        _ collection: String, _ id: String, _ paths: [IncludePath], readable: ((String) -> Bool)? = nil
    ) throws
        -> (object: JSON, truncated: Bool)?
    {
        guard let object = try objects.get(collection, id, txn) else { return nil }
        var item = object.json
        var budget = Self.includeLimit
        var truncated = false
        for path in paths {
            item = try including(
                path.segments[...], in: item, hops: 0, budget: &budget, truncated: &truncated, readable: readable)
        }
        return (item, truncated)
    }

    private func including(
        _ segments: ArraySlice<String>, in value: JSON, hops: Int, budget: inout Int, truncated: inout Bool,
        readable: ((String) -> Bool)?
    ) throws -> JSON {
        switch value {
        case .array(let elements):
            var result: [JSON] = []
            result.reserveCapacity(elements.count)
            for element in elements {
                result.append(
                    try including(
                        segments, in: element, hops: hops, budget: &budget, truncated: &truncated, readable: readable))
            }
            return .array(result)
        case .object(var object):
            let typed = TypedValue.recognize(object)
            /// The typed value as it stays when its target is not included: marked, or as it is.
            func unincluded(of collection: String) -> JSON? {
                if let readable, !readable(collection) {
                    object["$forbidden"] = true
                    return .object(object)
                }
                guard budget > 0 else {
                    truncated = true
                    return value
                }
                budget -= 1
                return nil
            }
            if case .file(let name)? = typed {
                if let kept = unincluded(of: FileName.collection) { return kept }
                guard let file = try file(name) else {
                    object["$missing"] = true
                    return .object(object)
                }
                return file.json(withUploader: false)
            }
            if case .reference(let collection, let id)? = typed {
                guard hops < IncludePath.maxReferences else { return value }
                if let kept = unincluded(of: collection) { return kept }
                guard let target = try objects.get(collection, id, txn) else {
                    object["$missing"] = true
                    return .object(object)
                }
                return try including(
                    segments, in: target.json, hops: hops + 1, budget: &budget, truncated: &truncated,
                    readable: readable)
            }
            guard let segment = segments.first else { return value }
            guard typed == nil, let next = object[segment] else { return value }
            object[segment] = try including(
                segments.dropFirst(), in: next, hops: hops, budget: &budget, truncated: &truncated, readable: readable)
            return .object(object)
        default:
            return value
        }
    }
}
