import FolioJSON

/// What one client may expect of the objects and views it owns (no other client writes them), and
/// the writes it sent since the last check. Its thread changes it during a workload; the checks
/// read and settle it between workloads.
final class ClientLedger: @unchecked Sendable {
    let client: Int
    /// Object keys in the order the client first used them (so choices from a seed repeat).
    private(set) var objectKeys: [ObjectKey] = []
    var objects: [ObjectKey: Possibilities<ObjectState>] = [:]
    private(set) var viewNames: [String] = []
    var views: [String: Possibilities<ViewState>] = [:]
    /// Creates without an id that got no answer: nonce → collection. The log tells whether they
    /// happened, and under which id.
    var pendingCreates: [String: String] = [:]
    /// Every write since the last check, in the order sent.
    var records: [WriteRecord] = []
    private var counter = 0

    init(client: Int) { self.client = client }

    /// A new name, unique in the store: for nonces, ids and view names.
    func nextName(_ prefix: String) -> String {
        counter += 1
        return "\(prefix)\(client)x\(counter)"
    }

    /// Starts tracking an object, never created yet.
    func track(_ key: ObjectKey) {
        guard objects[key] == nil else { return }
        objectKeys.append(key)
        objects[key] = Possibilities(.neverCreated)
    }

    func trackView(_ name: String) {
        guard views[name] == nil else { return }
        viewNames.append(name)
        views[name] = Possibilities(.absent)
    }

    /// The one state the client expects of `key` (every write of it answered), if so.
    func known(_ key: ObjectKey) -> ObjectState? { objects[key]?.single }
}
