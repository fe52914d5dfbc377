import FolioJSON

/// Who sent a command: the peer's credentials from `SO_PEERCRED`.
public struct Origin: Sendable, Equatable {
    public var uid: UInt32
    public var gid: UInt32
    public var pid: Int32

    public init(uid: UInt32, gid: UInt32, pid: Int32) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
    }
}

/// One immutable entry of the event log. Everything needed to apply it is in it: ids, versions and
/// the timestamp were decided when the command was accepted.
public struct Event: Sendable, Equatable {
    public enum Change: Sendable, Equatable {
        case created(collection: String, id: String, data: JSONObject)
        /// `patch` is the JSON Merge Patch as accepted; `ops`, field operations applied after it.
        case updated(collection: String, id: String, patch: JSONObject, ops: FieldOperations?)
        case deleted(collection: String, id: String)
        case viewDefined(ViewDefinition)
        case viewDropped(name: String)
        case schemaDefined(Schema)
        case schemaDropped(collection: String)
        /// A name bound to content already in the blob store; created at the event's time, by its origin.
        case filePut(FileBinding)
        case fileDeleted(name: String)
    }

    /// What the first event of a write sent with a `requestKey` records of the request, so that a
    /// retry gets the same result, also after a restart or a rebuild.
    public struct RequestRecord: Sendable, Equatable {
        public var key: String
        /// SHA-256 of the request's canonical form, as hex: a retry must send the same request.
        public var digest: String
        /// Events the request appended, this one included (a batch's, and those its delete rules made).
        public var events: Int
        /// For a batch that is not atomic: the ops that failed, with their errors.
        public var failed: [Failure]

        public struct Failure: Sendable, Equatable {
            public var index: Int
            public var code: String
            public var message: String
            /// What the answer carried beside code and message (`expectedVersion`, `existingId`, ...).
            public var details: JSONObject

            public init(index: Int, code: String, message: String, details: JSONObject = [:]) {
                self.index = index
                self.code = code
                self.message = message
                self.details = details
            }
        }

        public init(key: String, digest: String, events: Int, failed: [Failure] = []) {
            self.key = key
            self.digest = digest
            self.events = events
            self.failed = failed
        }
    }

    /// Position in the global log: 1, 2, 3, ... without gaps.
    public var sequence: UInt64
    public var timestamp: Timestamp
    public var origin: Origin
    public var change: Change
    /// The object's version after this event (0 for view and schema events).
    public var version: UInt64
    /// The event whose delete rule made this one (`nullify`, `cascade`, `owns`); nil for the events
    /// of commands.
    public var cause: UInt64?
    public var request: RequestRecord?

    public init(
        sequence: UInt64, timestamp: Timestamp, origin: Origin, version: UInt64, change: Change, cause: UInt64? = nil,
        request: RequestRecord? = nil
    ) {
        self.sequence = sequence
        self.timestamp = timestamp
        self.origin = origin
        self.version = version
        self.change = change
        self.cause = cause
        self.request = request
    }

    public var typeName: String {
        switch change {
        case .created: return "created"
        case .updated: return "updated"
        case .deleted: return "deleted"
        case .viewDefined: return "view.defined"
        case .viewDropped: return "view.dropped"
        case .schemaDefined: return "schema.defined"
        case .schemaDropped: return "schema.dropped"
        case .filePut: return "file.put"
        case .fileDeleted: return "file.deleted"
        }
    }

    /// The collection and id of the object the event changes; nil for view, schema and file events.
    public var object: (collection: String, id: String)? {
        switch change {
        case .created(let collection, let id, _), .updated(let collection, let id, _, _),
            .deleted(let collection, let id):
            return (collection, id)
        case .viewDefined, .viewDropped, .schemaDefined, .schemaDropped, .filePut, .fileDeleted:
            return nil
        }
    }
}

/// Which past state a `get` asks for.
public enum PointInTime: Sendable, Equatable {
    /// As it was after the event with this sequence.
    case sequence(UInt64)
    /// As it was at this instant: after every event accepted at or before it.
    case instant(Instant)
}

extension Event {
    /// The object after this event, given the object before it: the fold that rebuilds an object
    /// from its history. Throws only if the event's field operations do not fit the object, which
    /// the writer checked when it accepted them.
    public func applied(to object: StoredObject?) throws(ValidationError) -> StoredObject? {
        switch change {
        case .created(let collection, let id, let data):
            return StoredObject(
                collection: collection, id: id, version: version, createdAt: timestamp, updatedAt: timestamp, data: data
            )
        case .updated(_, _, let patch, let ops):
            guard var object else { return nil }
            object.version = version
            object.updatedAt = timestamp
            object.data = MergePatch.apply(patch, to: object.data)
            if let ops { object.data = try ops.apply(to: object.data) }
            return object
        case .deleted:
            return nil
        case .viewDefined, .viewDropped, .schemaDefined, .schemaDropped, .filePut, .fileDeleted:
            return object
        }
    }
}
