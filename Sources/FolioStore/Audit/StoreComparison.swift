import LMDB

/// Byte-for-byte comparison of the derived databases of two stores.
public struct StoreDifference: Sendable, Equatable, CustomStringConvertible {
    public let database: String
    public let key: [UInt8]
    /// What each side holds under the key; nil where it holds nothing.
    public let left: [UInt8]?
    public let right: [UInt8]?

    public var description: String {
        let shown = String(decoding: key.map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: ".") }, as: UTF8.self)
        switch (left, right) {
        case (nil, _): return "\(database): \(shown) only on the right"
        case (_, nil): return "\(database): \(shown) only on the left"
        default: return "\(database): \(shown) differs"
        }
    }
}

extension Store {
    /// Every entry of the derived databases (current state, history, catalog, trees) that differs
    /// between this store and `other`, up to `limit`.
    public func differences(from other: Store, limit: Int = 100) throws -> [StoreDifference] {
        try read { left in
            try other.read { right in
                var differences: [StoreDifference] = []
                for (mine, theirs) in zip(databases.derived, other.databases.derived) {
                    try Self.compare(mine, left.txn, theirs, right.txn, limit: limit, into: &differences)
                    if differences.count >= limit { break }
                }
                // The view op stream's state, in the main database.
                let mine = try left.txn.get(databases.viewOps.main, ViewBuffer.stateKey).map { Array($0) }
                let theirs = try right.txn.get(other.databases.viewOps.main, ViewBuffer.stateKey).map { Array($0) }
                if mine != theirs, differences.count < limit {
                    differences.append(
                        StoreDifference(database: "(main)", key: ViewBuffer.stateKey, left: mine, right: theirs))
                }
                return differences
            }
        }
    }

    static func compare(
        _ leftDatabase: Database, _ leftTxn: Transaction, _ rightDatabase: Database, _ rightTxn: Transaction,
        limit: Int,
        into differences: inout [StoreDifference]
    ) throws {
        try leftTxn.withCursor(leftDatabase) { left in
            try rightTxn.withCursor(rightDatabase) { right in
                var a = try left.first()
                var b = try right.first()
                while differences.count < limit {
                    switch (a, b) {
                    case (nil, nil):
                        return
                    case (let x?, nil):
                        differences.append(
                            StoreDifference(
                                database: leftDatabase.name, key: Array(x.key), left: Array(x.value), right: nil))
                        a = try left.next()
                    case (nil, let y?):
                        differences.append(
                            StoreDifference(
                                database: leftDatabase.name, key: Array(y.key), left: nil, right: Array(y.value)))
                        b = try right.next()
                    case (let x?, let y?):
                        let order = compareBytes(x.key, y.key)
                        if order < 0 {
                            differences.append(
                                StoreDifference(
                                    database: leftDatabase.name, key: Array(x.key), left: Array(x.value), right: nil))
                            a = try left.next()
                        } else if order > 0 {
                            differences.append(
                                StoreDifference(
                                    database: leftDatabase.name, key: Array(y.key), left: nil, right: Array(y.value)))
                            b = try right.next()
                        } else {
                            if !x.value.elementsEqual(y.value) {
                                differences.append(
                                    StoreDifference(
                                        database: leftDatabase.name, key: Array(x.key), left: Array(x.value),
                                        right: Array(y.value)))
                            }
                            a = try left.next()
                            b = try right.next()
                        }
                    }
                }
            }
        }
    }
}
