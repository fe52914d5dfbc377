import FolioJSON

/// A change a client asks for. Validated when decoded; the writer turns it into an event.
public enum Command: Sendable {
    /// `id` nil: the writer makes one.
    case create(collection: String, id: String?, data: JSONObject)
    case update(collection: String, id: String, patch: JSONObject, ifVersion: UInt64?)
    case delete(collection: String, id: String, ifVersion: UInt64?)
    case defineView(ViewDefinition)
    case dropView(name: String)
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
