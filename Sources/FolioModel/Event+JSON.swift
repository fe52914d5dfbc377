import FolioJSON

extension Event {
    /// The event's canonical bytes: compact JSON with a fixed key order. These bytes are what the log
    /// stores and what the chain hash covers; decoding them and encoding again gives the same bytes.
    public func encoded() -> [UInt8] {
        var writer = JSONWriter(capacity: 256)
        write(to: &writer)
        return writer.bytes
    }

    /// The canonical bytes, and where in them a created object's data lies (its canonical JSON,
    /// reusable as is).
    public func encodedWithData() -> (bytes: [UInt8], data: Range<Int>?) {
        var writer = JSONWriter(capacity: 256)
        var data: Range<Int>?
        write(to: &writer, dataRange: &data)
        return (writer.bytes, data)
    }

    public func write(to writer: inout JSONWriter) {
        var ignored: Range<Int>?
        write(to: &writer, dataRange: &ignored)
    }

    private func write(to writer: inout JSONWriter, dataRange: inout Range<Int>?) {
        writer.bytes.append(UInt8(ascii: "{"))
        writer.writeKey("seq", first: true)
        writer.write(sequence)
        writer.writeKey("type")
        writer.write(typeName)
        writer.writeKey("at")
        writer.write(timestamp)
        switch change {
        case .created(let collection, let id, let data):
            writeObjectFields(collection: collection, id: id, to: &writer)
            writer.writeKey("data")
            let start = writer.bytes.count
            writer.write(data)
            dataRange = start..<writer.bytes.count
        case .updated(let collection, let id, let patch):
            writeObjectFields(collection: collection, id: id, to: &writer)
            writer.writeKey("patch")
            writer.write(patch)
        case .deleted(let collection, let id):
            writeObjectFields(collection: collection, id: id, to: &writer)
        case .viewDefined(let definition):
            writer.writeKey("view")
            writer.write(definition.json)
        case .viewDropped(let name):
            writer.writeKey("view")
            writer.write(name)
        }
        writer.writeKey("by")
        writer.writeRaw("{\"uid\":")
        writer.write(UInt64(origin.uid))
        writer.writeRaw(",\"gid\":")
        writer.write(UInt64(origin.gid))
        writer.writeRaw(",\"pid\":")
        writer.write(Int64(origin.pid))
        writer.writeRaw("}}")
    }

    private func writeObjectFields(collection: String, id: String, to writer: inout JSONWriter) {
        writer.writeKey("collection")
        writer.write(collection)
        writer.writeKey("id")
        writer.write(id)
        writer.writeKey("version")
        writer.write(version)
    }

    /// Decodes canonical event bytes, checking every field; `extraKeys` may appear besides
    /// (an export line carries `hash`). `checkingData: false` trusts the data and patch to follow the
    /// record rules: for events this store accepted itself, whose bytes the hash chain vouches for.
    public init(decoding bytes: UnsafeRawBufferPointer, allowing extraKeys: Set<String> = [], checkingData: Bool = true) throws(ValidationError) {
        var ignored: Range<Int>?
        try self.init(decoding: bytes, dataRange: &ignored, checkingData: checkingData)
    }

    /// Decodes canonical event bytes and tells where the data of a `created` event lies in them.
    public init(decoding bytes: UnsafeRawBufferPointer, dataRange: inout Range<Int>?, checkingData: Bool = true) throws(ValidationError) {
        let json: JSON
        do { json = try JSONParser.parse(bytes, rangeOf: "data", range: &dataRange) } catch {
            throw ValidationError("event is not valid JSON: \(error)")
        }
        try self.init(json: json, checkingData: checkingData)
    }

    private static let objectEventKeys: Set<String> = ["seq", "type", "at", "by", "collection", "id", "version"]
    private static let viewEventKeys: Set<String> = ["seq", "type", "at", "by", "view"]

    public init(json: JSON, allowing extraKeys: Set<String> = [], checkingData: Bool = true) throws(ValidationError) {
        guard case .object(let object) = json else { throw ValidationError("an event must be a JSON object") }
        func field(_ key: String) throws(ValidationError) -> JSON {
            guard let value = object[key] else { throw ValidationError("event lacks \"\(key)\"") }
            return value
        }
        func string(_ key: String) throws(ValidationError) -> String {
            guard case .string(let value) = try field(key) else { throw ValidationError("event field \"\(key)\" must be a string") }
            return value
        }
        func unsigned(_ value: JSON, _ key: String, max: UInt64 = UInt64(Int64.max)) throws(ValidationError) -> UInt64 {
            guard case .int(let number) = value, number >= 0, UInt64(number) <= max else {
                throw ValidationError("event field \"\(key)\" must be a non-negative integer")
            }
            return UInt64(number)
        }
        guard let sequence = try? unsigned(try field("seq"), "seq"), sequence > 0 else {
            throw ValidationError("event field \"seq\" must be a positive integer")
        }
        let type = try string("type")
        guard let timestamp = Timestamp(rfc3339: try string("at")) else {
            throw ValidationError("event field \"at\" must be an RFC 3339 time with milliseconds")
        }
        guard case .object(let by) = try field("by"), by.count == 3, let uid = by["uid"], let gid = by["gid"], let pid = by["pid"]
        else { throw ValidationError("event field \"by\" must be {\"uid\", \"gid\", \"pid\"}") }
        guard case .int(let pidNumber) = pid, let pidValue = Int32(exactly: pidNumber) else {
            throw ValidationError("event field \"by.pid\" must be an integer")
        }
        let origin = Origin(
            uid: UInt32(try unsigned(uid, "by.uid", max: UInt64(UInt32.max))),
            gid: UInt32(try unsigned(gid, "by.gid", max: UInt64(UInt32.max))), pid: pidValue)

        let change: Change
        var payloadKey: String?
        var version: UInt64 = 0
        switch type {
        case "created", "updated", "deleted":
            let collection = try string("collection")
            let id = try string("id")
            try Names.validateCollection(collection)
            try Names.validateID(id)
            version = try unsigned(try field("version"), "version")
            guard version > 0 else { throw ValidationError("event field \"version\" must be positive") }
            switch type {
            case "created":
                guard case .object(let data) = try field("data") else { throw ValidationError("event field \"data\" must be an object") }
                if checkingData { try RecordData.validate(data: data) }
                payloadKey = "data"
                change = .created(collection: collection, id: id, data: data)
            case "updated":
                guard case .object(let patch) = try field("patch") else { throw ValidationError("event field \"patch\" must be an object") }
                if checkingData { try RecordData.validate(patch: patch) }
                payloadKey = "patch"
                change = .updated(collection: collection, id: id, patch: patch)
            default:
                change = .deleted(collection: collection, id: id)
            }
        case "view.defined":
            change = .viewDefined(try ViewDefinition(parsing: try field("view")))
        case "view.dropped":
            let name = try string("view")
            try Names.validateView(name)
            change = .viewDropped(name: name)
        default:
            throw ValidationError("unknown event type \(Names.quoted(type))")
        }
        let expected = change.isViewChange ? Self.viewEventKeys : Self.objectEventKeys
        for key in object.keys where !expected.contains(key) && key != payloadKey && !extraKeys.contains(key) {
            throw ValidationError("unexpected field \(Names.quoted(key)) in a \(type) event")
        }
        self.init(sequence: sequence, timestamp: timestamp, origin: origin, version: version, change: change)
    }
}

extension Event.Change {
    var isViewChange: Bool {
        switch self {
        case .viewDefined, .viewDropped: return true
        default: return false
        }
    }
}
