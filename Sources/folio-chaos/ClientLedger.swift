import FolioJSON

/// What one client may expect of the objects and views it owns (no other client writes them), and
/// the writes it sent since the last check. Its thread changes it during a workload; the checks
/// read and settle it between workloads.
final class ClientLedger: @unchecked Sendable {
    let client: Int
    /// Object keys in the order the client first used them (so choices from a seed repeat).
    private(set) var objectKeys: [ObjectKey] = []
    var objects: [ObjectKey: Possibilities<ObjectState>] = [:]
    private var keysByCollection: [String: [ObjectKey]] = [:]
    private(set) var viewNames: [String] = []
    var views: [String: Possibilities<ViewState>] = [:]
    /// Creates without an id that got no answer: nonce → collection. The log tells whether they
    /// happened, and under which id.
    var pendingCreates: [String: String] = [:]
    /// The writes sent with a request key, by key, and the keys in the order first used.
    private(set) var keyedRequests: [String: KeyedRequest] = [:]
    private(set) var requestKeys: [String] = []
    /// Keys of writes whose answer was lost, to retry early in the next cycle.
    var lostAnswers: [String] = []
    /// What each counter's `count` may be.
    var counters: [ObjectKey: CounterTally] = [:]
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
        keysByCollection[key.collection, default: []].append(key)
        objects[key] = Possibilities(.neverCreated)
    }

    /// The keys of `collection` the client tracks, in the order first used.
    func keys(in collection: String) -> [ObjectKey] { keysByCollection[collection] ?? [] }

    /// Notes what became of a keyed write (the first time, or again after a retry ran it as new).
    func remember(_ write: ModelWrite, _ status: KeyedRequest.Status) {
        guard let key = write.requestKey else { return }
        if let known = keyedRequests[key] {
            known.status = status
        } else {
            requestKeys.append(key)
            keyedRequests[key] = KeyedRequest(key: key, commands: write.commands, form: write.form, status: status)
        }
    }

    func trackView(_ name: String) {
        guard views[name] == nil else { return }
        viewNames.append(name)
        views[name] = Possibilities(.absent)
    }

    /// The one state the client expects of `key` (every write of it answered), if so.
    func known(_ key: ObjectKey) -> ObjectState? { objects[key]?.single }
}
