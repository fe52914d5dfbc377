import FolioJSON

/// A reference held by an object: the field path it sits at (object keys from the top of the data;
/// arrays are passed through, so every element of `items` is at `items`) and its target. A
/// `{"$file": name}` is a reference too, to the id `name` of the pseudo-collection `$files`
/// (`FileName.collection`), so the reference index answers who refers to a file as it does for
/// objects.
public struct Reference: Sendable, Hashable {
    public var path: String
    public var collection: String
    public var id: String

    public init(path: String, collection: String, id: String) {
        self.path = path
        self.collection = collection
        self.id = id
    }

    public var target: String { collection + "/" + id }

    /// The file name a `{"$file"}` reference holds; nil for a reference to an object.
    public var fileName: String? { collection == FileName.collection ? id : nil }

    /// Every distinct reference in `data`, in the order first met. Linear in the data's size: a
    /// path is spelled out only for the references found.
    public static func all(in data: JSONObject) -> [Reference] {
        // Only an object can be a reference, and a {"$date"} is none: most records hold no other
        // object below the top level, and are answered without building a path.
        guard data.contains(where: { mayHoldReference($0.value) }) else { return [] }
        var found: [Reference] = []
        // Duplicates are looked for in `found` while it is short; a set is made only for long lists.
        var seen: Set<Reference>? = nil
        var path: [String] = []
        for field in data {
            path.append(field.key)
            collect(field.value, path: &path, into: &found, &seen)
            path.removeLast()
        }
        return found
    }

    /// Whether `value` is or holds an object other than a `{"$date"}`, which `collect` would skip.
    private static func mayHoldReference(_ value: JSON) -> Bool {
        switch value {
        case .object(let object): return !isDate(object)
        case .array(let elements): return elements.contains(where: mayHoldReference)
        default: return false
        }
    }

    private static func isDate(_ object: JSONObject) -> Bool { object.count == 1 && object.fields[0].key == "$date" }

    private static func collect(
        _ value: JSON, path: inout [String], into found: inout [Reference], _ seen: inout Set<Reference>?
    ) {
        switch value {
        case .array(let elements):
            for element in elements { collect(element, path: &path, into: &found, &seen) }
        case .object(let object):
            // A {"$date"} is no reference: not parsed to learn that (most records hold dates).
            if isDate(object) { return }
            let target: (collection: String, id: String)?
            switch TypedValue.recognize(object) {
            case .reference(let collection, let id)?: target = (collection, id)
            case .file(let name)?: target = (FileName.collection, name)
            case .date?, nil: target = nil
            }
            if let target {
                let reference = Reference(
                    path: path.joined(separator: "."), collection: target.collection, id: target.id)
                if found.count < 16 {
                    if !found.contains(reference) { found.append(reference) }
                } else {
                    if seen == nil { seen = Set(found) }
                    if seen!.insert(reference).inserted { found.append(reference) }
                }
                return
            }
            guard object.count > 0, object.fields[0].key.first != "$" else { return }
            for field in object {
                path.append(field.key)
                collect(field.value, path: &path, into: &found, &seen)
                path.removeLast()
            }
        default:
            return
        }
    }
}
