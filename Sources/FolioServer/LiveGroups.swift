import FolioStore

/// Windows of live queries that subscribers share (`LiveQueries.Group`), found by query (to join
/// one) and by the keys a commit's objects have in their order (to move only the windows a commit
/// touches): all the ranges of one view share one order, and a key finds its range by its prefix,
/// so a commit costs O(events × prefix lengths + windows touched), not O(windows).
struct LiveGroups {
    /// The windows of one order, by range prefix.
    private struct Order {
        /// Any of its queries: all compute the same keys.
        var template: LiveQuery
        var byPrefix: [[UInt8]: [LiveQueries.Group]] = [:]
        /// The prefix lengths in use, and how many windows have each.
        var prefixLengths: [Int: Int] = [:]
    }

    private var byIdentity: [[UInt8]: [LiveQueries.Group]] = [:]
    private var byOrder: [[UInt8]: Order] = [:]
    private(set) var count = 0

    var all: [LiveQueries.Group] { byIdentity.values.flatMap { $0 } }

    /// A window of this query that `matches` accepts, to join.
    func group(identity: [UInt8], where matches: (LiveQueries.Group) -> Bool) -> LiveQueries.Group? {
        byIdentity[identity]?.first(where: matches)
    }

    mutating func add(_ group: LiveQueries.Group) {
        let query = group.window.query
        byIdentity[query.identity, default: []].append(group)
        var order = byOrder[query.orderIdentity] ?? Order(template: query)
        order.byPrefix[query.rangePrefix, default: []].append(group)
        order.prefixLengths[query.rangePrefix.count, default: 0] += 1
        byOrder[query.orderIdentity] = order
        count += 1
    }

    mutating func remove(_ group: LiveQueries.Group) {
        let query = group.window.query
        guard let index = byIdentity[query.identity]?.firstIndex(where: { $0 === group }) else { return }
        byIdentity[query.identity]!.remove(at: index)
        if byIdentity[query.identity]!.isEmpty { byIdentity[query.identity] = nil }
        if var order = byOrder[query.orderIdentity] {
            order.byPrefix[query.rangePrefix]?.removeAll { $0 === group }
            if order.byPrefix[query.rangePrefix]?.isEmpty ?? false { order.byPrefix[query.rangePrefix] = nil }
            order.prefixLengths[query.rangePrefix.count]! -= 1
            if order.prefixLengths[query.rangePrefix.count] == 0 { order.prefixLengths[query.rangePrefix.count] = nil }
            byOrder[query.orderIdentity] = order.byPrefix.isEmpty ? nil : order
        }
        count -= 1
    }

    /// The windows a commit's events enter or leave (by the objects' keys before and after them),
    /// with the events' keys in each window's order.
    func touched(by applied: [StoreWriter.Applied]) -> [(
        group: LiveQueries.Group, keys: [(old: [UInt8]?, new: [UInt8]?)]
    )] {
        var found: [(LiveQueries.Group, [(old: [UInt8]?, new: [UInt8]?)])] = []
        var seen = Set<ObjectIdentifier>()
        for order in byOrder.values {
            let collection = order.template.collection
            guard applied.contains(where: { $0.event.object?.collection == collection }) else { continue }
            let keys = applied.map { event in
                event.event.object?.collection == collection
                    ? (order.template.orderKey(for: event.before), order.template.orderKey(for: event.object))
                    : (nil, nil)
            }
            for case let key? in keys.flatMap({ [$0.0, $0.1] }) {
                for length in order.prefixLengths.keys where length <= key.count {
                    for group in order.byPrefix[Array(key.prefix(length))] ?? []
                    where seen.insert(ObjectIdentifier(group)).inserted {
                        found.append((group, keys))
                    }
                }
            }
        }
        return found
    }
}
