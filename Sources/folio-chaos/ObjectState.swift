import FolioJSON

/// One state an object can be in: its version and its data fields, or absent (never created, or
/// deleted) at a version. Data equality ignores field order.
struct ObjectState: Equatable, CustomStringConvertible {
    static let neverCreated = ObjectState(version: 0, data: nil)

    var version: Int64
    /// The data fields without the system fields; nil when the object is absent.
    var data: JSONObject?

    var isPresent: Bool { data != nil }

    /// The state an object of a `create` or `update` answer (or a `list` item) describes.
    init(object: JSONObject) {
        version = object["version"]?.integerValue ?? -1
        var fields = object
        for name in ObjectState.systemFields { fields[name] = nil }
        data = fields
    }

    init(version: Int64, data: JSONObject?) {
        self.version = version
        self.data = data
    }

    static let systemFields = ["collection", "id", "version", "createdAt", "updatedAt"]

    var description: String {
        guard let data else { return "absent at version \(version)" }
        return "version \(version) \(JSON.object(data))"
    }
}
