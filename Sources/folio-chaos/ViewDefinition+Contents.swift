import FolioJSON

extension ViewDefinition {
    /// Whether an object with `data` belongs in the view: its `where`, for the forms the workload
    /// defines (equality, and `$eq` `$gt` `$gte` `$lt` `$lte` on numbers).
    func includes(_ data: JSONObject) -> Bool {
        guard case .object(let conditions)? = filter else { return true }
        return conditions.allSatisfy { condition in
            let value = data[condition.key]
            guard case .object(let operators) = condition.value else { return value == condition.value }
            return operators.allSatisfy { term in
                if term.key == "$eq" { return value == term.value }
                guard let left = value.flatMap(Self.number), let right = Self.number(term.value) else { return false }
                switch term.key {
                case "$gt": return left > right
                case "$gte": return left >= right
                case "$lt": return left < right
                case "$lte": return left <= right
                default: return false
                }
            }
        }
    }

    /// The sort-field values that a unique view keeps distinct; nil when a field is missing (such
    /// an object is exempt, like a NULL in an SQL unique index).
    func uniqueKey(_ data: JSONObject) -> [JSON]? {
        var key: [JSON] = []
        for field in sortFields {
            guard let value = data[field] else { return nil }
            key.append(value)
        }
        return key
    }

    private static func number(_ value: JSON) -> Double? {
        switch value {
        case .int(let number): return Double(number)
        case .double(let number): return number
        default: return nil
        }
    }
}
