import FolioJSON
import FolioModel

/// Decodes one request line into a `Request`, or the error to answer with. Pure: no I/O, no state.
public enum RequestDecoder {
    /// On failure, the error comes with the tag if the line got far enough to have one.
    public static func decode(_ line: UnsafeRawBufferPointer) -> Result<Request, TaggedError> {
        if let request = plainRequest(line) { return .success(request) }
        return decode(line, owner: nil)
    }

    /// `decode` without its shortcut for plain reads (`plainRequest`): what the shortcut must agree with.
    public static func decodeInGeneral(_ line: UnsafeRawBufferPointer) -> Result<Request, TaggedError> {
        decode(line, owner: nil)
    }

    /// Decodes a line held in an array of its own, which the request may keep: the base64 of a
    /// `file.put` or `file.write` is decoded in it, in place (`FileContent`). `recycle` gets the
    /// array back once nothing holds it: at the end of the decoding, or once the request is done
    /// with its content.
    public static func decode(owning line: consuming [UInt8], recycle: (@Sendable ([UInt8]) -> Void)? = nil) -> Result<
        Request, TaggedError
    > {
        let buffer = LineBuffer(line, recycle: recycle)
        return buffer.bytes.withUnsafeMutableBytes { decode(UnsafeRawBufferPointer($0), owner: ($0, buffer)) }
    }

    /// `owner`: the line open for writing, and the buffer holding it, when the decoder owns it.
    private static func decode(
        _ line: UnsafeRawBufferPointer, owner: (bytes: UnsafeMutableRawBufferPointer, buffer: LineBuffer)?
    ) -> Result<Request, TaggedError> {
        if line.isEmpty {
            return .failure(
                TaggedError(tag: nil, error: ProtocolError(.badRequest, "empty line: expected a JSON object")))
        }
        let json: JSON
        var tagRange: Range<Int>?
        var dataRange: Range<Int>?
        do {
            // Only an owned line keeps its data where it is; a short line's is copied anyway.
            json =
                owner == nil
                ? try JSONParser.parse(line, rangeOf: "tag", range: &tagRange)
                : try JSONParser.parse(line, rangeOf: "tag", range: &tagRange, deferring: "data", deferred: &dataRange)
        } catch {
            return .failure(TaggedError(tag: nil, error: ProtocolError(.badRequest, "invalid JSON: \(error)")))
        }
        guard case .object(let object) = json else {
            return .failure(
                TaggedError(
                    tag: nil,
                    error: ProtocolError(.badRequest, "a request must be a JSON object, found \(json.kindDescription)"))
            )
        }
        var tag: Tag?
        switch object["tag"] {
        case nil, .null?: tag = nil
        case let value? where value.isTagKind:
            let text = tagRange.map { Array(UnsafeRawBufferPointer(rebasing: line[$0])) } ?? value.serialized()
            tag = Tag(value: value, text: text)
        case let value?:
            return .failure(
                TaggedError(
                    tag: nil,
                    error: ProtocolError(
                        .badRequest, "tag must be a string or a number, found \(value.kindDescription)")))
        }
        guard let opValue = object["op"] else {
            return .failure(TaggedError(tag: tag, error: ProtocolError(.badRequest, "missing field \"op\"")))
        }
        guard case .string(let op) = opValue else {
            return .failure(
                TaggedError(
                    tag: tag,
                    error: ProtocolError(.badRequest, "field \"op\" must be a string, found \(opValue.kindDescription)")
                ))
        }
        guard let spec = OperationTable.spec(named: op) else {
            return .failure(
                TaggedError(
                    tag: tag,
                    error: ProtocolError(
                        .unknownOp,
                        "unknown op \(Names.quoted(op)); known ops: \(OperationTable.names.joined(separator: ", "))")))
        }
        do {
            var fields = Fields(object: object, op: op)
            if let dataRange { fields.data = Fields.DeferredData(line: line, range: dataRange, owner: owner) }
            let operation = try spec.decode(&fields)
            let minSeq = try fields.optionalUnsigned("minSeq")
            if minSeq != nil {
                switch operation {
                case .read: break
                case .write, .upload:
                    throw ProtocolError(
                        .badRequest, "minSeq is for reads; a write always runs on the newest state of the log")
                case .stream:
                    throw ProtocolError(
                        .badRequest,
                        op == "watch"
                            ? "minSeq is for reads; watch takes after or resumeAfter to say where to start"
                            : "minSeq is for reads; \(op) is not one")
                }
            }
            try fields.rejectUnknown()
            return .success(Request(tag: tag, operation: operation, spec: spec, minSeq: minSeq))
        } catch let error as ProtocolError {
            return .failure(TaggedError(tag: tag, error: error))
        } catch {
            return .failure(TaggedError(tag: tag, error: ProtocolError(.badRequest, "\(error)")))
        }
    }

    public struct TaggedError: Error, Sendable {
        public var tag: Tag?
        public var error: ProtocolError

        public init(tag: Tag?, error: ProtocolError) {
            self.tag = tag
            self.error = error
        }
    }

    // MARK: The decoders of `OperationTable`

    static func create(_ fields: inout Fields) throws -> Command {
        let collection = try fields.collection()
        let data = try fields.requiredObject("data")
        try validated { () throws(ValidationError) in try RecordData.validate(data: data) }
        let id = try fields.optionalString("id")
        if let id { try validated { () throws(ValidationError) in try Names.validateID(id) } }
        return .create(collection: collection, id: id, data: data)
    }

    static func get(_ fields: inout Fields) throws -> Request.ReadOperation {
        let collection = try fields.collection()
        let id = try fields.id()
        let atSeq = try fields.optionalUnsigned("atSeq")
        let asOf = try fields.optionalDate("asOf")
        if atSeq != nil && asOf != nil { throw ProtocolError(.badRequest, "get takes atSeq or asOf, not both") }
        let point = atSeq.map(PointInTime.sequence) ?? asOf.map(PointInTime.instant)
        let include = try fields.include()
        if point != nil && !include.isEmpty {
            throw ProtocolError(.badRequest, "get takes include or a point in time, not both")
        }
        return .get(collection: collection, id: id, at: point, include: include)
    }

    static func update(_ fields: inout Fields) throws -> Command {
        try batchOperation(&fields, op: "update", index: nil).command
    }

    static func delete(_ fields: inout Fields) throws -> Command {
        try batchOperation(&fields, op: "delete", index: nil).command
    }

    /// `{"ops": [...], "atomic"?: true}`: each op an object with `op` create, update or delete and
    /// that op's fields (no `tag`, no `requestKey`).
    static func batch(_ fields: inout Fields) throws -> Command {
        guard let value = fields.take("ops") else {
            throw ProtocolError(.badRequest, "batch needs field \"ops\": an array of writes")
        }
        guard case .array(let elements) = value, !elements.isEmpty, elements.count <= BatchOperation.maxOperations
        else {
            throw ProtocolError(
                .badRequest, "batch: \"ops\" must be an array of 1 to \(BatchOperation.maxOperations) writes")
        }
        let atomic = try fields.optionalBool("atomic") ?? true
        var operations: [BatchOperation] = []
        operations.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            do {
                guard case .object(let object) = element else {
                    throw ProtocolError(.badRequest, "must be an object, found \(element.kindDescription)")
                }
                guard case .string(let op)? = object["op"] else {
                    throw ProtocolError(.badRequest, "needs \"op\": create, update or delete")
                }
                guard ["create", "update", "delete"].contains(op) else {
                    throw ProtocolError(
                        .badRequest, "op \(Names.quoted(op)) cannot be in a batch: only create, update and delete")
                }
                var opFields = Fields(object: object, op: op, nested: true)
                _ = opFields.take("op")
                let operation = try batchOperation(&opFields, op: op, index: index)
                try opFields.rejectUnknown()
                operations.append(operation)
            } catch let error as ProtocolError {
                throw ProtocolError(
                    .badRequest, "batch ops[\(index)]: \(error.message)", details: [("index", String(index))])
            }
        }
        return .batch(operations, atomic: atomic)
    }

    /// A create, update or delete; in op `index` of a batch (`index` non-nil), values and the id may
    /// be `{"$result": n}` for an earlier op n.
    private static func batchOperation(_ fields: inout Fields, op: String, index: Int?) throws -> BatchOperation {
        let results = index.map { 0..<$0 }
        let collection = try fields.collection()
        switch op {
        case "create":
            let data = try fields.requiredObject("data")
            let found = try validated { () throws(ValidationError) in
                try RecordData.validate(data: data, results: results)
            }
            let id = try fields.optionalString("id")
            if let id { try validated { () throws(ValidationError) in try Names.validateID(id) } }
            return BatchOperation(
                command: .create(collection: collection, id: id, data: data), idResult: nil, hasResultValues: found)
        case "update":
            let (id, idResult) = try batchID(&fields, results: results)
            let patch = try fields.optionalObject("patch")
            var found = false
            if let patch {
                found = try validated { () throws(ValidationError) in
                    try RecordData.validate(patch: patch, results: results)
                }
            }
            var ops: FieldOperations?
            if let opsJSON = fields.take("ops") {
                var opsFound = false
                ops = try validated { () throws(ValidationError) in
                    try FieldOperations(parsing: opsJSON, beside: patch, results: results, found: &opsFound)
                }
                found = found || opsFound
            }
            guard patch != nil || ops != nil else {
                throw ProtocolError(.badRequest, "update needs \"patch\" or \"ops\" (or both)")
            }
            let command = Command.update(
                collection: collection, id: id, patch: patch ?? JSONObject(), ops: ops,
                ifVersion: try fields.optionalUnsigned("ifVersion"))
            return BatchOperation(command: command, idResult: idResult, hasResultValues: found)
        default:
            let (id, idResult) = try batchID(&fields, results: results)
            return BatchOperation(
                command: .delete(collection: collection, id: id, ifVersion: try fields.optionalUnsigned("ifVersion")),
                idResult: idResult,
                hasResultValues: false)
        }
    }

    /// The `id` of an update or delete; in a batch it may be `{"$result": n}`.
    private static func batchID(_ fields: inout Fields, results: Range<Int>?) throws -> (String, Int?) {
        if let results, case .object(let object)? = fields.peek("id"),
            let index = BatchOperation.resultIndex(of: object)
        {
            _ = fields.take("id")
            guard results.contains(index) else {
                throw ProtocolError(.badRequest, "\"id\": {\"$result\": \(index)} must name an earlier op of the batch")
            }
            return ("", index)
        }
        return (try fields.id(), nil)
    }

    static func defineSchema(_ fields: inout Fields) throws -> Command {
        var object = JSONObject()
        object["collection"] = .string(try fields.collection())
        guard let specs = fields.take("fields") else {
            throw ProtocolError(.badRequest, "schema.define needs field \"fields\"")
        }
        object["fields"] = specs
        if let additional = fields.take("additionalFields") { object["additionalFields"] = additional }
        return .defineSchema(try validated { () throws(ValidationError) in try Schema(parsing: .object(object)) })
    }

    static func history(_ fields: inout Fields) throws -> Request.ReadOperation {
        let collection = try fields.collection()
        let id = try fields.id()
        let after = try fields.optionalUnsigned("after") ?? 0
        let limit = try fields.limit(default: 100, max: 1000)
        return .history(collection: collection, id: id, after: after, limit: limit)
    }

    static func events(_ fields: inout Fields) throws -> Request.ReadOperation {
        let after = try fields.optionalUnsigned("after") ?? 0
        let limit = try fields.limit(default: 100, max: 1000)
        return .events(after: after, limit: limit)
    }

    static func defineView(_ fields: inout Fields) throws -> Command {
        let name = try fields.requiredString("name")
        let collection = try fields.collection()
        let whereJSON = try fields.optionalObjectJSON("where")
        let sort = try fields.sort() ?? .creation
        let unique = try fields.optionalBool("unique") ?? false
        let definition = try validated { () throws(ValidationError) in
            try ViewDefinition(name: name, collection: collection, whereJSON: whereJSON, sort: sort, unique: unique)
        }
        return .defineView(definition)
    }

    static func dropView(_ fields: inout Fields) throws -> Command {
        let name = try fields.requiredString("name")
        try validated { () throws(ValidationError) in try Names.validateView(name) }
        return .dropView(name: name)
    }

    static func watch(_ fields: inout Fields) throws -> Request.StreamOperation {
        if let value = fields.take("query") {
            guard fields.peek("after") == nil, fields.peek("collection") == nil else {
                throw ProtocolError(
                    .badRequest,
                    "watch takes \"query\" (a live query) or \"after\" and \"collection\" (a watch of events), not both"
                )
            }
            let query = try liveQuery(value)
            return .live(query, resumeAfter: try fields.optionalUnsigned("resumeAfter"))
        }
        if fields.peek("resumeAfter") != nil {
            throw ProtocolError(
                .badRequest,
                "\"resumeAfter\" resumes a live query, which needs \"query\"; a watch of events resumes with \"after\"")
        }
        let after = try fields.optionalUnsigned("after")
        let collection = try fields.optionalString("collection")
        if let collection { try validated { () throws(ValidationError) in try Names.validateCollection(collection) } }
        return .watch(after: after, collection: collection)
    }

    /// The `query` of a live query: what `list` takes, less what pages (`offset`, `after`) or
    /// reads more than the window (`include`, `explain`).
    private static func liveQuery(_ value: JSON) throws -> Query {
        guard case .object(let object) = value else {
            throw ProtocolError(
                .badRequest,
                "watch: \"query\" must be an object {collection | view, where?, sort?, order?, limit?}, found \(value.kindDescription)"
            )
        }
        for (field, reason) in [
            ("offset", "its window is always the first limit objects"),
            ("after", "its window is always the first limit objects"),
            ("include", "references stay references in its objects"), ("explain", "its plan is not reported"),
        ] where object[field].map({ !$0.isNull }) ?? false {
            throw ProtocolError(.badRequest, "watch: a live query takes no \(Names.quoted(field)): \(reason)")
        }
        var fields = Fields(object: object, op: "watch", nested: true)
        do {
            let query = try self.query(&fields, paging: true)
            try fields.rejectUnknown()
            return query
        } catch let error as ProtocolError {
            throw ProtocolError(error.code, "watch: query: \(error.message)", details: error.details)
        }
    }

    static func unwatch(_ fields: inout Fields) throws -> Request.StreamOperation {
        guard let watch = fields.take("watch"), watch.isTagKind else {
            throw ProtocolError(.badRequest, "unwatch needs \"watch\": the tag of the watch request to end")
        }
        return .unwatch(watch: watch)
    }

    static func backup(_ fields: inout Fields) throws -> Request.ReadOperation {
        let directory = try fields.requiredString("directory")
        guard directory.hasPrefix("/") else {
            throw ProtocolError(.badRequest, "backup: \"directory\" must be an absolute path")
        }
        return .backup(directory: directory)
    }

    static func filePut(_ fields: inout Fields) throws -> UploadOperation {
        let (name, contentType, replace) = try fileTarget(&fields)
        if try fields.optionalBool("fd") == true {
            guard fields.peek("data") == nil else {
                throw ProtocolError(.badRequest, "file.put: \"data\" and \"fd\": give one of them")
            }
            return .putDescriptor(
                UploadPlan(name: name, contentType: contentType, replace: replace, size: nil, sha256: nil),
                descriptor: -1)
        }
        return .put(
            FileUpload(name: name, contentType: contentType, content: try fields.fileContent(), replace: replace))
    }

    /// The fields of `file.put` and `file.begin` that say where the content goes.
    private static func fileTarget(_ fields: inout Fields) throws -> (name: String?, contentType: String, replace: Bool)
    {
        let name = try fields.optionalString("name")
        if let name { try validated { () throws(ValidationError) in try FileName.validate(name) } }
        let contentType = try fields.optionalString("contentType") ?? FileBinding.defaultContentType
        try validated { () throws(ValidationError) in try FileBinding.validate(contentType: contentType) }
        let replace = try fields.optionalBool("replace") ?? false
        return (name, contentType, replace)
    }

    static func fileBegin(_ fields: inout Fields) throws -> UploadOperation {
        let (name, contentType, replace) = try fileTarget(&fields)
        let size = try fields.optionalUnsigned("size")
        let sha256 = try fields.optionalString("sha256")
        if let sha256 {
            try validated { () throws(ValidationError) in
                try FileBinding.validate(sha256: sha256, contentType: contentType)
            }
        }
        return .begin(UploadPlan(name: name, contentType: contentType, replace: replace, size: size, sha256: sha256))
    }

    static func fileWrite(_ fields: inout Fields) throws -> UploadOperation {
        let upload = try fields.uploadID()
        guard let offset = try fields.optionalUnsigned("offset") else {
            throw ProtocolError(.badRequest, "file.write needs field \"offset\"")
        }
        return .write(upload: upload, offset: offset, content: try fields.fileContent())
    }

    static func fileRead(_ fields: inout Fields) throws -> Request.ReadOperation {
        let source: FileRead.Source
        if let sha256 = try fields.optionalString("sha256") {
            guard sha256.utf8.count == 64,
                sha256.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
            else {
                throw ProtocolError(.badRequest, "file.read: \"sha256\" is 64 lowercase hex digits")
            }
            guard try fields.optionalString("name") == nil else {
                throw ProtocolError(.badRequest, "file.read takes \"name\" or \"sha256\", not both")
            }
            source = .content(sha256: sha256)
        } else {
            source = .name(try fields.fileName())
        }
        if try fields.optionalBool("fd") == true {
            guard case .name(let name) = source else {
                throw ProtocolError(.badRequest, "file.read: \"fd\" reads a file by its \"name\"")
            }
            guard fields.peek("offset") == nil && fields.peek("length") == nil else {
                throw ProtocolError(
                    .badRequest, "file.read: with \"fd\", the whole content is passed: no \"offset\" or \"length\"")
            }
            return .fileOpen(name: name)
        }
        let offset = try fields.optionalUnsigned("offset") ?? 0
        let length = try fields.optionalUnsigned("length") ?? UInt64(FileRead.maxLength)
        guard length <= UInt64(FileRead.maxLength) else {
            throw ProtocolError(
                .badRequest, "file.read: length \(length) is more than \(FileRead.maxLength) (512 KiB); read in pieces")
        }
        return .fileRead(source, offset: offset, length: Int(length))
    }

    static func fileGet(_ fields: inout Fields) throws -> Request.ReadOperation {
        let name = try fields.fileName()
        guard try fields.optionalBool("referrers") == true else {
            if fields.peek("limit") != nil {
                throw ProtocolError(
                    .badRequest, "file.get: \"limit\" applies to the referrers; ask for them with \"referrers\": true")
            }
            return .fileGet(name: name, referrers: nil)
        }
        return .fileGet(name: name, referrers: try fields.limit(default: Query.defaultLimit, max: Query.maxLimit))
    }

    static func fileList(_ fields: inout Fields) throws -> Request.ReadOperation {
        let (prefix, after, limit) = try fields.filePage()
        return .fileList(prefix: prefix, after: after, limit: limit)
    }

    /// `olderThan`: at most 100 years, in seconds.
    static let maxOlderThan: UInt64 = 100 * 365 * 86400

    static func fileOrphans(_ fields: inout Fields) throws -> Request.ReadOperation {
        let (prefix, after, limit) = try fields.filePage()
        let olderThan = try fields.optionalUnsigned("olderThan") ?? 0
        guard olderThan <= maxOlderThan else {
            throw ProtocolError(
                .badRequest, "file.orphans: olderThan \(olderThan) is more than \(maxOlderThan) seconds (100 years)")
        }
        return .fileOrphans(prefix: prefix, after: after, olderThan: olderThan, limit: limit)
    }

    static func fileDelete(_ fields: inout Fields) throws -> Command {
        let name = try fields.fileName()
        let force = try fields.optionalBool("force") ?? false
        switch try fields.optionalBool("ifUnreferenced") {
        case false?:
            throw ProtocolError(
                .badRequest,
                "file.delete: \"ifUnreferenced\" may only be true (the default); to delete a file records refer to, send \"force\": true"
            )
        case true? where force:
            throw ProtocolError(
                .badRequest, "file.delete: \"force\": true and \"ifUnreferenced\": true contradict each other")
        default:
            return .deleteFile(name: name, force: force)
        }
    }

    /// Which objects a query reads, by op: `list` and `count` a collection or a view (`count` also
    /// the referrers of `ref` from `from`); `links` the field of one object; `backlinks` referrers.
    enum QuerySource {
        case collectionOrView, links, backlinks
    }

    static func query(_ fields: inout Fields, paging: Bool, source kind: QuerySource = .collectionOrView) throws
        -> Query
    {
        let source: Query.Source
        var isView = false
        switch kind {
        case .links:
            let (collection, id) = try fields.reference("ref")
            let field = try fields.requiredString("field")
            let path = try validated { () throws(ValidationError) in try IncludePath(parsing: field) }
            try validated { () throws(ValidationError) in try Names.validateTopLevelField(path.segments[0]) }
            source = .links(collection: collection, id: id, field: path.segments)
        case .backlinks:
            source = try backlinksSource(&fields)
        case .collectionOrView:
            let view = try fields.optionalString("view")
            let collection = try fields.optionalString("collection")
            switch (view, collection) {
            case (let view?, nil):
                try validated { () throws(ValidationError) in try Names.validateView(view) }
                source = .view(view)
                isView = true
            case (nil, let collection?):
                try validated { () throws(ValidationError) in try Names.validateCollection(collection) }
                source = .collection(collection)
            case (nil, nil):
                guard !paging, fields.peek("ref") != nil else {
                    throw ProtocolError(
                        .badRequest,
                        "\(fields.op) needs \"collection\" or \"view\"\(paging ? "" : " (or \"ref\" and \"from\")")")
                }
                source = try backlinksSource(&fields)
            case (_?, _?): throw ProtocolError(.badRequest, "\(fields.op) takes \"collection\" or \"view\", not both")
            }
        }
        let whereJSON = try fields.optionalObjectJSON("where")
        let sort = try fields.sort()
        if isView, sort != nil {
            throw ProtocolError(.badRequest, "a list of a view takes no \"sort\": the view defines it")
        }
        var descending = false
        var limit = Query.defaultLimit
        var start = Query.Start.offset(0)
        if paging {
            switch try fields.optionalString("order") {
            case nil, "asc"?: descending = false
            case "desc"?: descending = true
            case let other?:
                throw ProtocolError(.badRequest, "order must be \"asc\" or \"desc\", found \(Names.quoted(other))")
            }
            limit = try fields.limit(default: Query.defaultLimit, max: Query.maxLimit)
            let offset = try fields.optionalUnsigned("offset")
            let after = try fields.optionalString("after")
            switch (offset, after) {
            case (_?, _?): throw ProtocolError(.badRequest, "list takes \"offset\" or \"after\", not both")
            case (let offset?, nil): start = .offset(Int(offset))
            case (nil, let token?):
                start = .after(try validated { () throws(ValidationError) in try PageCursor(token: token) })
            case (nil, nil): break
            }
        }
        let explain = try fields.optionalBool("explain") ?? false
        let include = paging ? try fields.include() : []
        return try validated { () throws(ValidationError) in
            try Query(
                source: source, whereJSON: whereJSON, sort: sort, descending: descending, limit: limit, start: start,
                explain: explain,
                include: include)
        }
    }

    /// `ref` (the target) and `from` (`"<Collection>.<field path>"`: where the references sit).
    private static func backlinksSource(_ fields: inout Fields) throws -> Query.Source {
        let (collection, id) = try fields.reference("ref")
        let from = try fields.requiredString("from")
        guard let dot = from.firstIndex(ofASCII: "."), dot != from.startIndex, from.index(after: dot) != from.endIndex
        else {
            throw ProtocolError(.badRequest, "\"from\" must be \"<Collection>.<field>\", e.g. \"Category.items\"")
        }
        let sourceCollection = String(from[..<dot])
        let path = String(from[from.index(after: dot)...])
        try validated { () throws(ValidationError) in
            try Names.validateCollection(sourceCollection)
            _ = try IncludePath(parsing: path)
        }
        return .backlinks(collection: collection, id: id, sourceCollection: sourceCollection, path: path)
    }

    @discardableResult
    private static func validated<T>(_ body: () throws(ValidationError) -> T) throws(ProtocolError) -> T {
        do { return try body() } catch { throw ProtocolError(.badRequest, error.message) }
    }
}

extension JSON {
    var isTagKind: Bool {
        switch self {
        case .string, .int, .double: return true
        default: return false
        }
    }
}

/// The fields of one request, read by name with type checks; whatever is left unread is unknown.
public struct Fields {
    let object: JSONObject
    let op: String
    /// Which of the object's fields were read, by position.
    private var read: [Bool]

    /// The top-level `data` string the parser left unread (`JSONParser.parse(_:rangeOf:range:deferring:deferred:)`).
    var data: DeferredData?

    /// A class, so that the `Fields` of every other request carry one nil reference, not the struct.
    final class DeferredData {
        /// The line being decoded, valid while it is.
        let line: UnsafeRawBufferPointer
        /// Where the string's characters are in `line`.
        let range: Range<Int>
        /// `line` open for writing, and the buffer holding it, if the decoder owns it.
        let owner: (bytes: UnsafeMutableRawBufferPointer, buffer: LineBuffer)?

        init(
            line: UnsafeRawBufferPointer, range: Range<Int>,
            owner: (bytes: UnsafeMutableRawBufferPointer, buffer: LineBuffer)?
        ) {
            self.line = line
            self.range = range
            self.owner = owner
        }
    }

    /// `nested`: an object inside a request (an op of a batch, a live query's query), where `tag`
    /// is a field like any other (none defines it) and `op` is read by the caller if it has one.
    init(object: JSONObject, op: String, nested: Bool = false) {
        self.object = object
        self.op = op
        read = object.fields.map { nested ? false : ($0.key == "op" || $0.key == "tag") }
    }

    mutating func take(_ key: String) -> JSON? {
        guard let index = object.fields.firstIndex(where: { $0.key == key }) else { return nil }
        read[index] = true
        if let data, key == "data" {
            return .string(String(decoding: UnsafeRawBufferPointer(rebasing: data.line[data.range]), as: UTF8.self))
        }
        let value = object.fields[index].value
        if value.isNull { return nil }  // (a ternary would turn nil into JSON.null)
        return value
    }

    /// The content of field `data`, base64 (`file.put`, `file.write`): decoded in the line itself
    /// when the decoder owns it, otherwise into an array of its own.
    mutating func fileContent() throws -> FileContent {
        guard let data else {
            guard let value = take("data") else { throw ProtocolError(.badRequest, "\(op) needs field \"data\"") }
            guard case .string(let text) = value else { throw wrongType("data", "a string", value) }
            return try FileContent.decoding(text)
        }
        if let index = object.fields.firstIndex(where: { $0.key == "data" }) { read[index] = true }
        self.data = nil
        guard let owner = data.owner else {
            return try FileContent.decoding(UnsafeRawBufferPointer(rebasing: data.line[data.range]))
        }
        // The parser is done with the line, and nothing else reads these characters.
        return try FileContent.decoding(owner.bytes, at: data.range, in: owner.buffer)
    }

    func rejectUnknown() throws {
        if let index = read.firstIndex(of: false) {
            throw ProtocolError(.badRequest, "unknown field \(Names.quoted(object.fields[index].key)) for op \(op)")
        }
    }

    func wrongType(_ key: String, _ expected: String, _ value: JSON) -> ProtocolError {
        ProtocolError(.badRequest, "field \"\(key)\" must be \(expected), found \(value.kindDescription)")
    }

    mutating func requiredString(_ key: String) throws -> String {
        guard let value = take(key) else { throw ProtocolError(.badRequest, "\(op) needs field \"\(key)\"") }
        guard case .string(let string) = value else { throw wrongType(key, "a string", value) }
        return string
    }

    mutating func optionalString(_ key: String) throws -> String? {
        guard let value = take(key) else { return nil }
        guard case .string(let string) = value else { throw wrongType(key, "a string", value) }
        return string
    }

    mutating func optionalBool(_ key: String) throws -> Bool? {
        guard let value = take(key) else { return nil }
        guard case .bool(let flag) = value else { throw wrongType(key, "true or false", value) }
        return flag
    }

    /// The value of `key` without reading it (it stays unknown until taken).
    func peek(_ key: String) -> JSON? {
        object[key].flatMap { $0.isNull ? nil : $0 }
    }

    mutating func optionalObject(_ key: String) throws -> JSONObject? {
        guard let value = take(key) else { return nil }
        guard case .object(let object) = value else { throw wrongType(key, "an object", value) }
        return object
    }

    /// `"<Collection>/<id>"` (or `{"$ref": ...}`).
    mutating func reference(_ key: String) throws -> (collection: String, id: String) {
        guard let value = take(key) else {
            throw ProtocolError(.badRequest, "\(op) needs field \"\(key)\": \"<Collection>/<id>\"")
        }
        var text: String
        switch value {
        case .string(let string): text = string
        case .object(let object) where object.count == 1 && object.keys[0] == "$ref":
            guard case .string(let string) = object.fields[0].value else {
                throw wrongType(key, "\"<Collection>/<id>\"", value)
            }
            text = string
        default: throw wrongType(key, "\"<Collection>/<id>\"", value)
        }
        do {
            guard case .reference(let collection, let id)? = try TypedValue.parse(["$ref": .string(text)]) else {
                throw ProtocolError(.badRequest, "field \"\(key)\" must be \"<Collection>/<id>\"")
            }
            return (collection, id)
        } catch let error as ValidationError {
            throw ProtocolError(.badRequest, "field \"\(key)\": \(error.message)")
        }
    }

    mutating func include() throws -> [IncludePath] {
        guard let value = take("include") else { return [] }
        guard case .array(let elements) = value, elements.count <= IncludePath.maxPaths else {
            throw ProtocolError(
                .badRequest, "field \"include\" must be an array of at most \(IncludePath.maxPaths) field paths")
        }
        return try elements.map { element in
            guard case .string(let text) = element else { throw wrongType("include", "an array of field paths", value) }
            do throws(ValidationError) { return try IncludePath(parsing: text) } catch {
                throw ProtocolError(.badRequest, error.message)
            }
        }
    }

    mutating func requestKey() throws -> String? {
        guard let key = try optionalString("requestKey") else { return nil }
        do { try RequestKey.validate(key) } catch { throw ProtocolError(.badRequest, error.message) }
        return key
    }

    mutating func requiredObject(_ key: String) throws -> JSONObject {
        guard let value = take(key) else { throw ProtocolError(.badRequest, "\(op) needs field \"\(key)\"") }
        guard case .object(let object) = value else { throw wrongType(key, "an object", value) }
        return object
    }

    mutating func optionalObjectJSON(_ key: String) throws -> JSON? {
        guard let value = take(key) else { return nil }
        guard case .object = value else { throw wrongType(key, "an object", value) }
        return value
    }

    mutating func optionalUnsigned(_ key: String) throws -> UInt64? {
        guard let value = take(key) else { return nil }
        guard let number = value.integerValue, number >= 0 else {
            throw wrongType(key, "a non-negative integer", value)
        }
        return UInt64(number)
    }

    mutating func optionalDate(_ key: String) throws -> Instant? {
        guard let value = take(key) else { return nil }
        switch value {
        case .string(let text):
            if let instant = Instant(rfc3339: text) { return instant }
        case .object(let object):
            if case .date(let instant)? = try? TypedValue.parse(object) { return instant }
        default: break
        }
        throw ProtocolError(.badRequest, "field \"\(key)\" must be an RFC 3339 date-time or {\"$date\": ...}")
    }

    mutating func collection() throws -> String {
        let name = try requiredString("collection")
        do { try Names.validateCollection(name) } catch { throw ProtocolError(.badRequest, error.message) }
        return name
    }

    mutating func id() throws -> String {
        let id = try requiredString("id")
        do { try Names.validateID(id) } catch { throw ProtocolError(.badRequest, error.message) }
        return id
    }

    /// An upload's id, as `file.begin` answered it: at most 64 characters.
    mutating func uploadID() throws -> String {
        let id = try requiredString("upload")
        guard !id.isEmpty, id.utf8.count <= 64 else {
            throw ProtocolError(.badRequest, "field \"upload\" must be the id file.begin answered (1 to 64 characters)")
        }
        return id
    }

    mutating func fileName() throws -> String {
        let name = try requiredString("name")
        do { try FileName.validate(name) } catch { throw ProtocolError(.badRequest, error.message) }
        return name
    }

    /// `prefix`, `after` and `limit` of a page of file names (`file.list`, `file.orphans`).
    mutating func filePage() throws -> (prefix: String, after: String?, limit: Int) {
        let prefix = try optionalString("prefix") ?? ""
        guard prefix.utf8.count <= FileName.maxBytes else {
            throw ProtocolError(.badRequest, "\(op): prefix longer than \(FileName.maxBytes) bytes")
        }
        return (prefix, try optionalString("after"), try limit(default: Query.defaultLimit, max: Query.maxLimit))
    }

    mutating func limit(default defaultValue: Int, max: Int) throws -> Int {
        guard let value = take("limit") else { return defaultValue }
        guard let number = value.integerValue else { throw wrongType("limit", "an integer", value) }
        guard number >= 0 && number <= Int64(max) else {
            throw ProtocolError(.badRequest, "limit \(number) is out of range: 0 to \(max)")
        }
        return Int(number)
    }

    mutating func sort() throws -> SortOrder? {
        guard let value = take("sort") else { return nil }
        do { return try SortOrder(parsing: value) } catch { throw ProtocolError(.badRequest, error.message) }
    }
}
