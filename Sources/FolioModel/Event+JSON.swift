import FolioJSON

extension Event {
    /// The event's canonical bytes: compact JSON with a fixed key order. These bytes are what the log
    /// stores and what the chain hash covers; decoding them and encoding again gives the same bytes.
    public func encoded() -> [UInt8] {
        var writer = JSONWriter(capacity: 256)
        write(to: &writer)
        return writer.compactBytes
    }

    /// The canonical bytes, where in them a created object's data lies (its canonical JSON,
    /// reusable as is), and the parts `encodedParts` gives.
    public func encodedWithData() -> (bytes: [UInt8], data: Range<Int>?, headEnd: Int, cause: Range<Int>?) {
        var writer = JSONWriter(capacity: 256)
        var data: Range<Int>?
        var headEnd = 0
        var cause: Range<Int>?
        write(to: &writer, dataRange: &data, headEnd: &headEnd, causeRange: &cause)
        return (writer.compactBytes, data, headEnd, cause)
    }

    public func write(to writer: inout JSONWriter) {
        var ignored: Range<Int>?
        write(to: &writer, dataRange: &ignored)
    }

    /// The canonical bytes in the parts a cluster's log composes them from (docs/CLUSTER.md): where
    /// the head `{"seq":N,"type":"T","at":"A"` ends, and where the number of `cause` lies, so that
    /// the sequence, the time and the cause can be decided later and spliced in.
    public func encodedParts() -> (bytes: [UInt8], headEnd: Int, cause: Range<Int>?) {
        var writer = JSONWriter(capacity: 256)
        var ignored: Range<Int>?
        var headEnd = 0
        var cause: Range<Int>?
        write(to: &writer, dataRange: &ignored, headEnd: &headEnd, causeRange: &cause)
        return (writer.bytes, headEnd, cause)
    }

    private func write(to writer: inout JSONWriter, dataRange: inout Range<Int>?) {
        var headEnd = 0
        var causeRange: Range<Int>?
        write(to: &writer, dataRange: &dataRange, headEnd: &headEnd, causeRange: &causeRange)
    }

    private func write(
        to writer: inout JSONWriter, dataRange: inout Range<Int>?, headEnd: inout Int, causeRange: inout Range<Int>?
    ) {
        // The head in one chunk: an append per piece cost about a hundred instructions each, for
        // every event the writer applies and every event a cluster node checks.
        writer.appendChunk(capacity: 96) { chunk in
            chunk.put("{\"seq\":")
            chunk.put(decimal: sequence)
            chunk.put(",\"type\":\"")
            chunk.put(Self.staticTypeName(change))
            chunk.put("\",\"at\":\"")
            chunk.put(atMost: 30) { timestamp.instant.writeRFC3339Milliseconds(to: $0) }
            chunk.put(UInt8(ascii: "\""))
        }
        headEnd = writer.bytes.count
        switch change {
        case .created(let collection, let id, let data):
            writeObjectFields(collection: collection, id: id, to: &writer)
            writer.writeKey("data")
            let start = writer.bytes.count
            writer.write(data)
            dataRange = start..<writer.bytes.count
        case .updated(let collection, let id, let patch, let ops):
            writeObjectFields(collection: collection, id: id, to: &writer)
            writer.writeKey("patch")
            writer.write(patch)
            if let ops {
                writer.writeKey("ops")
                writer.write(ops.json)
            }
        case .deleted(let collection, let id):
            writeObjectFields(collection: collection, id: id, to: &writer)
        case .viewDefined(let definition):
            writer.writeKey("view")
            writer.write(definition.json)
        case .viewDropped(let name):
            writer.writeKey("view")
            writer.write(name)
        case .schemaDefined(let schema):
            writer.writeKey("schema")
            writer.write(schema.json)
        case .schemaDropped(let collection):
            writer.writeKey("collection")
            writer.write(collection)
        case .filePut(let binding):
            writer.writeKey("name")
            writer.write(binding.name)
            writer.writeKey("sha256")
            writer.write(binding.sha256)
            writer.writeKey("size")
            writer.write(binding.size)
            writer.writeKey("contentType")
            writer.write(binding.contentType)
            writer.writeKey("replace")
            writer.writeRaw(binding.replace ? "true" : "false")
        case .fileDeleted(let name):
            writer.writeKey("name")
            writer.write(name)
        }
        if let cause {
            writer.writeKey("cause")
            let start = writer.bytes.count
            writer.write(cause)
            causeRange = start..<writer.bytes.count
        }
        if let request {
            writer.writeKey("request")
            writer.write(request.json)
        }
        writer.appendChunk(capacity: 64) { chunk in
            chunk.put(",\"by\":{\"uid\":")
            chunk.put(decimal: UInt64(origin.uid))
            chunk.put(",\"gid\":")
            chunk.put(decimal: UInt64(origin.gid))
            chunk.put(",\"pid\":")
            if origin.pid < 0 { chunk.put(UInt8(ascii: "-")) }
            chunk.put(decimal: UInt64(origin.pid.magnitude))
            chunk.put("}}")
        }
    }

    /// `typeName`, as the static text it is.
    private static func staticTypeName(_ change: Change) -> StaticString {
        switch change {
        case .created: "created"
        case .updated: "updated"
        case .deleted: "deleted"
        case .viewDefined: "view.defined"
        case .viewDropped: "view.dropped"
        case .schemaDefined: "schema.defined"
        case .schemaDropped: "schema.dropped"
        case .filePut: "file.put"
        case .fileDeleted: "file.deleted"
        }
    }

    private func writeObjectFields(collection: String, id: String, to writer: inout JSONWriter) {
        // Valid names need no escape (letters, digits, `_ - . :`): written in one chunk. Anything
        // else (an event being checked, not yet validated) the general way.
        var collection = collection
        var id = id
        let written = collection.withUTF8 { name in
            id.withUTF8 { idBytes in
                guard Self.isPlain(name), Self.isPlain(idBytes) else { return false }
                writer.appendChunk(capacity: name.count + idBytes.count + 64) { chunk in
                    chunk.put(",\"collection\":\"")
                    chunk.put(UnsafeRawBufferPointer(name))
                    chunk.put("\",\"id\":\"")
                    chunk.put(UnsafeRawBufferPointer(idBytes))
                    chunk.put("\",\"version\":")
                    chunk.put(decimal: version)
                }
                return true
            }
        }
        guard !written else { return }
        writer.writeKey("collection")
        writer.write(collection)
        writer.writeKey("id")
        writer.write(id)
        writer.writeKey("version")
        writer.write(version)
    }

    /// Printable ASCII without a quote or a backslash: written as is between quotes.
    private static func isPlain(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        for byte in bytes where byte < 0x20 || byte >= 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
        { return false }
        return true
    }

    /// Decodes canonical event bytes, checking every field; `extraKeys` may appear besides
    /// (an export line carries `hash`). `checkingData: false` trusts the data and patch to follow the
    /// record rules: for events this store accepted itself, whose bytes the hash chain vouches for.
    public init(decoding bytes: UnsafeRawBufferPointer, allowing extraKeys: Set<String> = [], checkingData: Bool = true)
        throws(ValidationError)
    {
        var ignored: Range<Int>?
        try self.init(decoding: bytes, dataRange: &ignored, checkingData: checkingData)
    }

    /// Decodes canonical event bytes and tells where the data of a `created` event lies in them.
    /// An object event in its canonical layout is read by that layout (`decodingCanonicalObjectEvent`);
    /// anything else, and anything that fails a check there, the general way.
    public init(decoding bytes: UnsafeRawBufferPointer, dataRange: inout Range<Int>?, checkingData: Bool = true)
        throws(ValidationError)
    {
        if let event = Self.decodingCanonicalObjectEvent(bytes, dataRange: &dataRange, checkingData: checkingData) {
            self = event
            return
        }
        try self.init(decodingGenerally: bytes, dataRange: &dataRange, checkingData: checkingData)
    }

    /// Decodes event bytes through a JSON tree of the whole event: any key order and whitespace,
    /// and an error that says what is wrong.
    @_spi(Fuzzing) public init(
        decodingGenerally bytes: UnsafeRawBufferPointer, dataRange: inout Range<Int>?, checkingData: Bool = true
    ) throws(ValidationError) {
        let json: JSON
        do { json = try JSONParser.parse(bytes, rangeOf: "data", range: &dataRange) } catch {
            throw ValidationError("event is not valid JSON: \(error)")
        }
        try self.init(json: json, checkingData: checkingData)
    }

    private static let objectEventKeys: Set<String> = [
        "seq", "type", "at", "by", "collection", "id", "version", "cause", "request",
    ]
    private static let viewEventKeys: Set<String> = ["seq", "type", "at", "by", "view", "request"]
    private static let schemaEventKeys: Set<String> = ["seq", "type", "at", "by", "schema", "collection", "request"]
    private static let fileEventKeys: Set<String> = [
        "seq", "type", "at", "by", "name", "sha256", "size", "contentType", "replace", "request",
    ]

    public init(json: JSON, allowing extraKeys: Set<String> = [], checkingData: Bool = true) throws(ValidationError) {
        guard case .object(let object) = json else { throw ValidationError("an event must be a JSON object") }
        func field(_ key: String) throws(ValidationError) -> JSON {
            guard let value = object[key] else { throw ValidationError("event lacks \"\(key)\"") }
            return value
        }
        func string(_ key: String) throws(ValidationError) -> String {
            guard case .string(let value) = try field(key) else {
                throw ValidationError("event field \"\(key)\" must be a string")
            }
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
        guard case .object(let by) = try field("by"), by.count == 3, let uid = by["uid"], let gid = by["gid"],
            let pid = by["pid"]
        else { throw ValidationError("event field \"by\" must be {\"uid\", \"gid\", \"pid\"}") }
        guard case .int(let pidNumber) = pid, let pidValue = Int32(exactly: pidNumber) else {
            throw ValidationError("event field \"by.pid\" must be an integer")
        }
        let origin = Origin(
            uid: UInt32(try unsigned(uid, "by.uid", max: UInt64(UInt32.max))),
            gid: UInt32(try unsigned(gid, "by.gid", max: UInt64(UInt32.max))), pid: pidValue)

        let change: Change
        var payloadKey: String?
        var extraPayloadKey: String?
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
                guard case .object(let data) = try field("data") else {
                    throw ValidationError("event field \"data\" must be an object")
                }
                if checkingData { try RecordData.validate(data: data) }
                payloadKey = "data"
                change = .created(collection: collection, id: id, data: data)
            case "updated":
                guard case .object(let patch) = try field("patch") else {
                    throw ValidationError("event field \"patch\" must be an object")
                }
                if checkingData { try RecordData.validate(patch: patch) }
                payloadKey = "patch"
                var ops: FieldOperations?
                if let opsJSON = object["ops"] {
                    ops = try FieldOperations(parsing: opsJSON, beside: patch)
                    extraPayloadKey = "ops"
                }
                change = .updated(collection: collection, id: id, patch: patch, ops: ops)
            default:
                change = .deleted(collection: collection, id: id)
            }
        case "view.defined":
            change = .viewDefined(try ViewDefinition(parsing: try field("view")))
        case "view.dropped":
            let name = try string("view")
            try Names.validateView(name)
            change = .viewDropped(name: name)
        case "schema.defined":
            change = .schemaDefined(try Schema(parsing: try field("schema")))
        case "schema.dropped":
            let collection = try string("collection")
            try Names.validateCollection(collection)
            change = .schemaDropped(collection: collection)
        case "file.put":
            let name = try string("name")
            try FileName.validate(name)
            let sha256 = try string("sha256")
            let contentType = try string("contentType")
            try FileBinding.validate(sha256: sha256, contentType: contentType)
            guard case .bool(let replace) = try field("replace") else {
                throw ValidationError("event field \"replace\" must be true or false")
            }
            let size = try unsigned(try field("size"), "size")
            change = .filePut(
                FileBinding(name: name, sha256: sha256, size: size, contentType: contentType, replace: replace))
        case "file.deleted":
            let name = try string("name")
            try FileName.validate(name)
            change = .fileDeleted(name: name)
        default:
            throw ValidationError("unknown event type \(Names.quoted(type))")
        }
        let expected: Set<String>
        switch change {
        case .viewDefined, .viewDropped: expected = Self.viewEventKeys
        case .schemaDefined: expected = Self.schemaEventKeys.subtracting(["collection"])
        case .schemaDropped: expected = Self.schemaEventKeys.subtracting(["schema"])
        case .filePut: expected = Self.fileEventKeys
        case .fileDeleted: expected = Self.fileEventKeys.subtracting(["sha256", "size", "contentType", "replace"])
        default: expected = Self.objectEventKeys
        }
        for key in object.keys
        where !expected.contains(key) && key != payloadKey && key != extraPayloadKey && !extraKeys.contains(key) {
            throw ValidationError("unexpected field \(Names.quoted(key)) in a \(type) event")
        }
        var cause: UInt64?
        if let value = object["cause"] {
            cause = try unsigned(value, "cause")
            guard let cause, cause > 0, cause < sequence else {
                throw ValidationError("event field \"cause\" must name an earlier event")
            }
        }
        var request: RequestRecord?
        if let value = object["request"] { request = try RequestRecord(parsing: value) }
        self.init(
            sequence: sequence, timestamp: timestamp, origin: origin, version: version, change: change, cause: cause,
            request: request)
    }
}

extension Event.RequestRecord {
    /// `{"key", "digest", "events", "failed"?: [{"index", "code", "message", "details"?}]}`
    public var json: JSON {
        var object: JSONObject = ["key": .string(key), "digest": .string(digest), "events": .int(Int64(events))]
        if !failed.isEmpty {
            object["failed"] = .array(
                failed.map { failure in
                    var entry: JSONObject = [
                        "index": .int(Int64(failure.index)), "code": .string(failure.code),
                        "message": .string(failure.message),
                    ]
                    if !failure.details.isEmpty { entry["details"] = .object(failure.details) }
                    return .object(entry)
                })
        }
        return .object(object)
    }

    init(parsing json: JSON) throws(ValidationError) {
        guard case .object(let object) = json, case .string(let key)? = object["key"],
            case .string(let digest)? = object["digest"],
            case .int(let events)? = object["events"], events > 0
        else { throw ValidationError("event field \"request\" must be {\"key\", \"digest\", \"events\"}") }
        try RequestKey.validate(key)
        var failed: [Failure] = []
        if let list = object["failed"] {
            guard case .array(let entries) = list else {
                throw ValidationError("event field \"request.failed\" must be an array")
            }
            for entry in entries {
                guard case .object(let failure) = entry, case .int(let index)? = failure["index"], index >= 0,
                    case .string(let code)? = failure["code"], case .string(let message)? = failure["message"]
                else {
                    throw ValidationError(
                        "event field \"request.failed\" holds {\"index\", \"code\", \"message\", \"details\"?} entries")
                }
                var details: JSONObject = [:]
                if let value = failure["details"] {
                    guard case .object(let object) = value else {
                        throw ValidationError("event field \"request.failed.details\" must be an object")
                    }
                    details = object
                }
                for key in failure.keys where !["index", "code", "message", "details"].contains(key) {
                    throw ValidationError("unexpected field \(Names.quoted(key)) in an event's \"request.failed\"")
                }
                failed.append(Failure(index: Int(index), code: code, message: message, details: details))
            }
        }
        for key in object.keys where !["key", "digest", "events", "failed"].contains(key) {
            throw ValidationError("unexpected field \(Names.quoted(key)) in an event's \"request\"")
        }
        self.init(key: key, digest: digest, events: Int(events), failed: failed)
    }
}

/// The key a client gives a write so that retrying it is safe: 1 to 128 printable ASCII characters.
public enum RequestKey {
    public static let maxLength = 128

    public static func validate(_ key: String) throws(ValidationError) {
        let utf8 = key.utf8
        guard !utf8.isEmpty, utf8.count <= maxLength, utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            throw ValidationError("requestKey must be 1 to \(maxLength) printable ASCII characters")
        }
    }
}
