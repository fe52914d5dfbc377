import FolioJSON

/// An object as it is now: its identity, version, timestamps and data.
public struct StoredObject: Sendable, Equatable {
    public var collection: String
    public var id: String
    /// 1 after `created`, one more after each event since.
    public var version: UInt64
    public var createdAt: Timestamp
    public var updatedAt: Timestamp
    public var data: JSONObject

    public init(
        collection: String, id: String, version: UInt64, createdAt: Timestamp, updatedAt: Timestamp, data: JSONObject
    ) {
        self.collection = collection
        self.id = id
        self.version = version
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.data = data
    }

    /// The wire shape: system fields first, then the data's fields flattened.
    public func write(to writer: inout JSONWriter) {
        writer.bytes.append(UInt8(ascii: "{"))
        writer.writeKey("collection", first: true)
        writer.write(collection)
        writer.writeKey("id")
        writer.write(id)
        writer.writeKey("version")
        writer.write(version)
        writer.writeKey("createdAt")
        writer.write(createdAt)
        writer.writeKey("updatedAt")
        writer.write(updatedAt)
        for field in data {
            writer.bytes.append(UInt8(ascii: ","))
            writer.write(field.key)
            writer.bytes.append(UInt8(ascii: ":"))
            writer.write(field.value)
        }
        writer.bytes.append(UInt8(ascii: "}"))
    }

    public var json: JSON {
        var fields: [JSONObject.Field] = [
            .init(key: "collection", value: .string(collection)), .init(key: "id", value: .string(id)),
            .init(key: "version", value: .int(Int64(version))),
            .init(key: "createdAt", value: .string(createdAt.rfc3339)),
            .init(key: "updatedAt", value: .string(updatedAt.rfc3339)),
        ]
        fields.append(contentsOf: data.fields)
        return .object(JSONObject(fields))
    }
}

extension StoredObject: FieldSource {
    public func value(at path: FieldPath) -> Value? {
        switch path {
        case .id: return .string(id)
        case .createdAt: return .date(createdAt.instant)
        case .updatedAt: return .date(updatedAt.instant)
        case .version: return .int(Int64(version))
        case .data(let segments): return data.value(atPath: segments).map(Value.init)
        }
    }

    /// A field's key straight from what the object holds (a view's key of every write, the
    /// creation-order key of every create and delete): no `Value` made, which is boxed (indirect).
    public func appendSortKey(at path: FieldPath, descending: Bool, to bytes: inout [UInt8]) {
        switch path {
        case .data(let segments):
            // A top-level field, as most views sort by, without wrapping the data in a `JSON`.
            let json = segments.count == 1 ? data[segments[0]] : data.value(atPath: segments)
            SortKey.append(json: json, descending: descending, to: &bytes)
        case .id: SortKey.append(json: .string(id), descending: descending, to: &bytes)
        case .version: SortKey.append(json: .int(Int64(version)), descending: descending, to: &bytes)
        case .createdAt: SortKey.append(date: createdAt.instant, descending: descending, to: &bytes)
        case .updatedAt: SortKey.append(date: updatedAt.instant, descending: descending, to: &bytes)
        }
    }
}
