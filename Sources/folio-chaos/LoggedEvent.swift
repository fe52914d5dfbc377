import FolioJSON

/// One event of foliod's log, as `events` returns it, with the fields the checks read.
struct LoggedEvent: CustomStringConvertible {
    let seq: Int64
    let type: String
    /// Acceptance time, RFC 3339 in UTC with milliseconds: its text sorts as its time does.
    let at: String
    /// The object of a `created`, `updated` or `deleted` event.
    let key: ObjectKey?
    let version: Int64?
    let data: JSONObject?
    let patch: JSONObject?
    /// The field operations of an `updated` event, applied after its patch.
    let ops: JSONObject?
    /// The event that made this one, for what delete rules did.
    let cause: Int64?
    /// What the last event of a write sent with a `requestKey` records: key, digest, events, failed.
    let request: JSONObject?
    /// The `w` field of the data or patch: the nonce of the write that appended the event.
    let nonce: String?
    /// The definition of a `view.defined` event.
    let view: ViewDefinition?
    /// The name of a `view.dropped` event.
    let droppedView: String?
    /// The schema of a `schema.defined` event.
    let schema: JSONObject?
    let text: String

    init(_ object: JSONObject, text: String) throws(Violation) {
        guard let seq = object["seq"]?.integerValue, let type = object["type"]?.stringValue,
            let at = object["at"]?.stringValue,
            at.utf8.count == 24, at.hasSuffix("Z")
        else { throw Violation("log: an event without seq, type or a UTC time: \(text.prefix(300))") }
        self.seq = seq
        self.type = type
        self.at = at
        self.text = text
        if let collection = object["collection"]?.stringValue, let id = object["id"]?.stringValue {
            key = ObjectKey(collection: collection, id: id)
        } else {
            key = nil
        }
        version = object["version"]?.integerValue
        data = object["data"]?.objectValue
        patch = object["patch"]?.objectValue
        ops = object["ops"]?.objectValue
        cause = object["cause"]?.integerValue
        request = object["request"]?.objectValue
        nonce = (data ?? patch)?["w"]?.stringValue
        if type == "view.defined", case .object(let definition)? = object["view"] {
            view = ViewDefinition(definition)
        } else {
            view = nil
        }
        droppedView = type == "view.dropped" ? object["view"]?.stringValue : nil
        schema = type == "schema.defined" ? object["schema"]?.objectValue : nil
        switch type {
        case "created", "updated", "deleted":
            guard key != nil, version != nil else {
                throw Violation("log: event \(seq) lacks collection, id or version: \(text.prefix(300))")
            }
            if type == "created" && data == nil || type == "updated" && patch == nil {
                throw Violation("log: event \(seq) lacks its data or patch: \(text.prefix(300))")
            }
        case "view.defined":
            guard view != nil else {
                throw Violation("log: event \(seq) has no valid view definition: \(text.prefix(300))")
            }
        case "view.dropped":
            guard droppedView != nil else { throw Violation("log: event \(seq) names no view: \(text.prefix(300))") }
        case "schema.defined":
            guard schema?["collection"]?.stringValue != nil else {
                throw Violation("log: event \(seq) has no schema of a collection: \(text.prefix(300))")
            }
        default:
            throw Violation("log: event \(seq) has an unknown type \(type)")
        }
    }

    var subject: LogSubject {
        if let key { return .object(key) }
        if let collection = schema?["collection"]?.stringValue { return .schema(collection) }
        return .view(view?.name ?? droppedView ?? "")
    }

    var description: String { "event \(seq) \(text.prefix(400))" }
}
