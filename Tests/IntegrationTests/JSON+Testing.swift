import FolioJSON

/// Short reads of responses: `response["result"]?["id"]`, `response.errorCode`.
extension JSON {
    subscript(key: String) -> JSON? { objectValue?[key] }

    var arrayValue: [JSON]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    var boolValue: Bool? {
        if case .bool(let flag) = self { return flag }
        return nil
    }

    var isOK: Bool { self["ok"] == .bool(true) }

    /// The `result` of a successful response.
    var result: JSON? { isOK ? self["result"] : nil }

    /// The `error.code` of a failed response.
    var errorCode: String? { self["ok"] == .bool(false) ? self["error"]?["code"]?.stringValue : nil }

    var errorMessage: String? { self["error"]?["message"]?.stringValue }

    /// The object's `version` (of a response's result, or of an object).
    var version: Int64? { (result ?? self)["version"]?.integerValue }
}
