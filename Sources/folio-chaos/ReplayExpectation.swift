import FolioJSON

/// What a retry of a keyed request that was applied must be answered, marked `"replayed": true`:
/// the first answer again or, when the first answer was lost, the results its events imply.
enum ReplayExpectation {
    case answer(JSONObject)
    /// One item per command (a single request has one).
    case derived(batch: Bool, [Item])

    enum Item {
        /// The object right after its command's own event, whose time `updatedAt` must be.
        case object(ObjectKey, ObjectState, updatedAt: String)
        case deleted(ObjectKey, version: Int64)
        /// An op of a batch that is not atomic that failed: its code, and the message the log recorded.
        case failed(code: String, message: String?)
    }

    /// Why `result` is not the replay expected; nil if it is.
    func problem(_ result: JSONObject) -> String? {
        guard result["replayed"] == .bool(true) else { return "it is not marked \"replayed\": true" }
        var replayed = result
        replayed["replayed"] = nil
        switch self {
        case .answer(let first):
            guard case .array(let firstItems)? = first["results"], case .array(let items)? = replayed["results"],
                first.count == 1, replayed.count == 1
            else {
                return replayed == first ? nil : "the first answer was \(JSON.object(first))"
            }
            guard items.count == firstItems.count else { return "the first answer had \(firstItems.count) results" }
            for (index, (item, firstItem)) in zip(items, firstItems).enumerated() where item != firstItem {
                // foliod keeps a failed op's code and message, not its details (currentVersion, ...).
                let error = item.objectValue?["error"]?.objectValue
                let firstError = firstItem.objectValue?["error"]?.objectValue
                guard let error, let firstError, item.objectValue?["ok"] == .bool(false),
                    error["code"] == firstError["code"], error["message"] == firstError["message"]
                else { return "result \(index) was \(firstItem) in the first answer" }
            }
            return nil
        case .derived(let batch, let expected):
            guard batch else { return Self.problem(replayed, expected[0], ok: true) }
            guard case .array(let items)? = replayed["results"], items.count == expected.count else {
                return "expected \(expected.count) results"
            }
            for (index, (item, expectation)) in zip(items, expected).enumerated() {
                guard case .object(let object) = item else { return "result \(index) is not an object" }
                let ok = object["ok"] == .bool(true)
                guard let inner = (ok ? object["result"] : object["error"])?.objectValue,
                    let problem = Self.problem(inner, expectation, ok: ok)
                else { continue }
                return "result \(index): \(problem)"
            }
            return nil
        }
    }

    /// `answer` is an op's result (`ok`) or its error.
    private static func problem(_ answer: JSONObject, _ item: Item, ok: Bool) -> String? {
        switch item {
        case .object(let key, let state, let updatedAt):
            guard ok, answer["collection"]?.stringValue == key.collection, answer["id"]?.stringValue == key.id,
                ObjectState(object: answer) == state, answer["updatedAt"]?.stringValue == updatedAt
            else { return "\(JSON.object(answer)); the log makes it \(key) \(state) updated at \(updatedAt)" }
        case .deleted(let key, let version):
            guard ok, answer["id"]?.stringValue == key.id, answer["version"]?.integerValue == version else {
                return "\(JSON.object(answer)); the log has \(key) deleted at version \(version)"
            }
        case .failed(let code, let message):
            guard !ok, answer["code"]?.stringValue == code, message == nil || answer["message"]?.stringValue == message
            else { return "\(JSON.object(answer)); the log recorded the op failed with \(code): \(message ?? "")" }
        }
        return nil
    }
}
