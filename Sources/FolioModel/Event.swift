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
        /// `patch` is the JSON Merge Patch as accepted.
        case updated(collection: String, id: String, patch: JSONObject)
        case deleted(collection: String, id: String)
        case viewDefined(ViewDefinition)
        case viewDropped(name: String)
    }

    /// Position in the global log: 1, 2, 3, ... without gaps.
    public var sequence: UInt64
    public var timestamp: Timestamp
    public var origin: Origin
    public var change: Change
    /// The object's version after this event (0 for view events).
    public var version: UInt64

    public init(sequence: UInt64, timestamp: Timestamp, origin: Origin, version: UInt64, change: Change) {
        self.sequence = sequence
        self.timestamp = timestamp
        self.origin = origin
        self.version = version
        self.change = change
    }

    public var typeName: String {
        switch change {
        case .created: return "created"
        case .updated: return "updated"
        case .deleted: return "deleted"
        case .viewDefined: return "view.defined"
        case .viewDropped: return "view.dropped"
        }
    }

    /// The collection and id of the object the event changes; nil for view events.
    public var object: (collection: String, id: String)? {
        switch change {
        case .created(let collection, let id, _), .updated(let collection, let id, _), .deleted(let collection, let id):
            return (collection, id)
        case .viewDefined, .viewDropped:
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
    /// from its history.
    public func applied(to object: StoredObject?) -> StoredObject? {
        switch change {
        case .created(let collection, let id, let data):
            return StoredObject(collection: collection, id: id, version: version, createdAt: timestamp, updatedAt: timestamp, data: data)
        case .updated(_, _, let patch):
            guard var object else { return nil }
            object.version = version
            object.updatedAt = timestamp
            object.data = MergePatch.apply(patch, to: object.data)
            return object
        case .deleted:
            return nil
        case .viewDefined, .viewDropped:
            return object
        }
    }
}
