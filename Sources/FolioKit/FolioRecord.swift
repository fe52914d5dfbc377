import FolioJSON

/// A record type stored in one collection, as a `Codable` value.
///
/// ```swift
/// struct TodoListItem: FolioRecord {
///     static let collection = "TodoListItem"
///     var id: String?
///     var version: Int?
///     var title: String?
///     var description: String?
/// }
/// ```
///
/// `id` and `version` are the server's (nil until saved). A type may also declare `createdAt` and
/// `updatedAt` (`Date?`): the server sets them, and `save` never writes them. `Date` fields are
/// stored as `{"$date"}`, `Ref<T>` as `{"$ref"}`, `FolioFile` as `{"$file"}`.
public protocol FolioRecord: Codable {
    /// The collection's name: a letter, then letters, digits or `_` (at most 64 bytes).
    static var collection: String { get }
    var id: String? { get }
    var version: Int? { get }
    /// Field paths for key paths FolioKit cannot name by itself (it probes the type's `Decodable`
    /// conformance; see `FolioError.unknownField`). Empty by default.
    static var fieldNames: [PartialKeyPath<Self>: String] { get }
}

/// The fields every object has, set by the server (PROTOCOL.md §4).
private let systemFields: Set<String> = ["collection", "id", "version", "createdAt", "updatedAt"]

extension FolioRecord {
    public static var fieldNames: [PartialKeyPath<Self>: String] { [:] }

    /// Creates the record, or updates it if it has an id and a version.
    ///
    /// - A record without an id is created with an id the server makes; one with an id and no
    ///   version is created with that id (`conflict` if it exists).
    /// - A record with both is updated only if it is still at that version (`ifVersion`), else
    ///   `conflict(current:)`: every field is set to the value's, and fields of the type that the
    ///   value leaves nil are removed. Fields the type does not know are kept.
    ///
    /// Returns the record as stored, with its id, version and timestamps.
    @discardableResult
    public func save(on folio: Folio, isolation: isolated (any Actor)? = #isolation) async throws -> Self {
        guard case .object(var data) = try RecordEncoder.encode(self) else {
            throw FolioError.encoding("\(Self.self) does not encode as an object")
        }
        for field in systemFields { data[field] = nil }
        let collection = JSON.string(Self.collection)
        let request: JSONObject
        if let id, let version {
            var ops = JSONObject()
            for field in data { ops[field.key] = .object(["$set": field.value]) }
            for key in FieldProbe<Self>.shared.topLevelKeys where data[key] == nil && !systemFields.contains(key) {
                ops[key] = .object(["$unset": true])
            }
            request = [
                "op": "update", "collection": collection, "id": .string(id), "ifVersion": .int(Int64(version)),
                ops.isEmpty ? "patch" : "ops": .object(ops),
            ]
        } else if let id {
            request = ["op": "create", "collection": collection, "id": .string(id), "data": .object(data)]
        } else {
            request = ["op": "create", "collection": collection, "data": .object(data)]
        }
        return try RecordDecoder.decode(Self.self, from: try await folio.request(request))
    }

    /// Reads the record with this id; `notFound` if there is none. `include` names reference
    /// fields to replace by their targets (dotted paths through references, PROTOCOL.md §5.3).
    public static func get(
        _ id: String, include: [String] = [], on folio: Folio, isolation: isolated (any Actor)? = #isolation
    ) async throws -> Self {
        var request: JSONObject = ["op": "get", "collection": .string(collection), "id": .string(id)]
        if !include.isEmpty { request["include"] = .array(include.map { .string($0) }) }
        return try RecordDecoder.decode(Self.self, from: try await folio.request(request))
    }

    /// Deletes the record, only if it is still at its version when it has one (else
    /// `conflict(current:)`). Throws `missingID` for a record never saved.
    public func delete(on folio: Folio, isolation: isolated (any Actor)? = #isolation) async throws {
        guard let id else { throw FolioError.missingID }
        var request: JSONObject = ["op": "delete", "collection": .string(Self.collection), "id": .string(id)]
        if let version { request["ifVersion"] = .int(Int64(version)) }
        _ = try await folio.request(request)
    }

    /// Deletes the record with this id, whatever its version.
    public static func delete(_ id: String, on folio: Folio, isolation: isolated (any Actor)? = #isolation) async throws
    {
        _ = try await folio.request(["op": "delete", "collection": .string(collection), "id": .string(id)])
    }

    /// A query of the collection, filtered by every condition (`\.title == "x"`, `\.n > 3`).
    public static func query(_ conditions: QueryCondition<Self>...) -> Query<Self> {
        Query(source: .collection(collection)).filter(conditions)
    }

    /// A query of a view of the collection; `conditions` may only fix the view's leading sort
    /// fields by equality (PROTOCOL.md §5.6).
    public static func query(view: String, _ conditions: QueryCondition<Self>...) -> Query<Self> {
        Query(source: .view(view)).filter(conditions)
    }
}
