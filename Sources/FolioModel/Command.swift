import FolioJSON

/// A change a client asks for. Validated when decoded; the writer turns it into events.
public enum Command: Sendable {
    /// `id` nil: the writer makes one.
    case create(collection: String, id: String?, data: JSONObject)
    /// The merge patch, then the field operations.
    case update(collection: String, id: String, patch: JSONObject, ops: FieldOperations?, ifVersion: UInt64?)
    case delete(collection: String, id: String, ifVersion: UInt64?)
    case defineView(ViewDefinition)
    case dropView(name: String)
    case defineSchema(Schema)
    case dropSchema(collection: String)
    /// Binds `name` (nil: the writer makes one) to content the server already wrote to the blob store.
    case putFile(name: String?, sha256: String, size: UInt64, contentType: String, replace: Bool)
    /// `force`: delete it even while records refer to it (their `{"$file"}` values dangle).
    case deleteFile(name: String, force: Bool)
    /// Up to `Batch.maxOperations` creates, updates and deletes; all or nothing when `atomic`.
    case batch([BatchOperation], atomic: Bool)

    /// An update by merge patch alone.
    public static func update(collection: String, id: String, patch: JSONObject, ifVersion: UInt64?) -> Command {
        .update(collection: collection, id: id, patch: patch, ops: nil, ifVersion: ifVersion)
    }

    /// The op's name on the wire.
    public var opName: String {
        switch self {
        case .create: return "create"
        case .update: return "update"
        case .delete: return "delete"
        case .defineView: return "view.define"
        case .dropView: return "view.drop"
        case .defineSchema: return "schema.define"
        case .dropSchema: return "schema.drop"
        case .putFile: return "file.put"
        case .deleteFile: return "file.delete"
        case .batch: return "batch"
        }
    }

    /// The command as canonical JSON, whatever the spelling of the request: what a request key's
    /// digest covers, so that a retry must ask for the same thing.
    public var canonicalJSON: JSON {
        var object: JSONObject = ["op": .string(opName)]
        switch self {
        case .create(let collection, let id, let data):
            object["collection"] = .string(collection)
            if let id { object["id"] = .string(id) }
            object["data"] = .object(data)
        case .update(let collection, let id, let patch, let ops, let ifVersion):
            object["collection"] = .string(collection)
            object["id"] = .string(id)
            object["patch"] = .object(patch)
            if let ops { object["ops"] = ops.json }
            if let ifVersion { object["ifVersion"] = .int(Int64(ifVersion)) }
        case .delete(let collection, let id, let ifVersion):
            object["collection"] = .string(collection)
            object["id"] = .string(id)
            if let ifVersion { object["ifVersion"] = .int(Int64(ifVersion)) }
        case .defineView(let definition): object["view"] = definition.json
        case .dropView(let name): object["name"] = .string(name)
        case .defineSchema(let schema): object["schema"] = schema.json
        case .dropSchema(let collection): object["collection"] = .string(collection)
        case .putFile(let name, let sha256, let size, let contentType, let replace):
            if let name { object["name"] = .string(name) }
            object["sha256"] = .string(sha256)
            object["size"] = .int(Int64(size))
            object["contentType"] = .string(contentType)
            object["replace"] = .bool(replace)
        case .deleteFile(let name, let force):
            object["name"] = .string(name)
            if force { object["force"] = true }
        case .batch(let operations, let atomic):
            object["ops"] = .array(operations.map(\.canonicalJSON))
            object["atomic"] = .bool(atomic)
        }
        return JSON.object(object).canonical
    }
}

/// A write as a client sent it: the command, and the key that makes retrying it safe.
public struct WriteRequest: Sendable {
    public var command: Command
    public var requestKey: String?

    public init(command: Command, requestKey: String? = nil) {
        self.command = command
        self.requestKey = requestKey
    }
}

/// What the writer decides when it accepts a command, recorded in the event.
public struct Acceptance: Sendable {
    public var timestamp: Timestamp
    public var origin: Origin

    public init(timestamp: Timestamp, origin: Origin) {
        self.timestamp = timestamp
        self.origin = origin
    }
}
