import FolioJSON

/// What a query names: a system field of every object, or a path into its data (`address.city`).
public enum FieldPath: Hashable, Sendable, CustomStringConvertible {
    case id
    case createdAt
    case updatedAt
    case version
    /// Keys from the top of the object's data, one per level.
    case data([String])

    public init(parsing text: String) throws(ValidationError) {
        switch text {
        case "id": self = .id
        case "createdAt": self = .createdAt
        case "updatedAt": self = .updatedAt
        case "version": self = .version
        case "collection":
            throw ValidationError("field \"collection\" cannot be queried: every object of a query has the same one")
        default:
            let segments = text.asciiSegments(separatedBy: ".")
            guard !segments.contains(where: \.isEmpty) else {
                throw ValidationError("field path \(Names.quoted(text)) has an empty segment")
            }
            if let first = segments.first, first.hasPrefix("_") {
                throw ValidationError("field path \(Names.quoted(text)) names a reserved field")
            }
            if segments.contains(where: { $0.hasPrefix("$") }) {
                throw ValidationError(
                    "field path \(Names.quoted(text)) reaches into a typed value or names a reserved field")
            }
            self = .data(segments)
        }
    }

    public var description: String {
        switch self {
        case .id: return "id"
        case .createdAt: return "createdAt"
        case .updatedAt: return "updatedAt"
        case .version: return "version"
        case .data(let segments): return segments.joined(separator: ".")
        }
    }
}

/// Anything a query can read fields of: a stored object.
public protocol FieldSource {
    /// The value at `path`, nil when missing.
    func value(at path: FieldPath) -> Value?

    /// Appends the sort key of the value at `path` (`SortKey.append`).
    func appendSortKey(at path: FieldPath, descending: Bool, to bytes: inout [UInt8])
}

extension FieldSource {
    public func appendSortKey(at path: FieldPath, descending: Bool, to bytes: inout [UInt8]) {
        SortKey.append(value(at: path), descending: descending, to: &bytes)
    }
}

extension JSONObject {
    /// The JSON at a data path, nil when a segment is missing or not an object.
    public func value(atPath segments: [String]) -> JSON? {
        var current: JSON = .object(self)
        for segment in segments {
            guard case .object(let object) = current, let next = object[segment] else { return nil }
            current = next
        }
        return current
    }
}
