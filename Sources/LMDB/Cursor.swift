import CLMDB

/// A position in one database, handed to the closure of `Transaction.withCursor`.
/// Each move returns the entry it lands on, or nil past either end; the buffers are valid until the
/// next write or the end of the transaction.
public struct Cursor {
    public typealias Entry = (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)

    let handle: OpaquePointer

    public func first() throws(LMDBError) -> Entry? { try move(MDB_FIRST) }
    public func last() throws(LMDBError) -> Entry? { try move(MDB_LAST) }
    public func next() throws(LMDBError) -> Entry? { try move(MDB_NEXT) }
    public func previous() throws(LMDBError) -> Entry? { try move(MDB_PREV) }

    /// The first entry whose key is greater than or equal to `key` (`MDB_SET_RANGE`).
    public func seek(atLeast key: UnsafeRawBufferPointer) throws(LMDBError) -> Entry? {
        var k = MDB_val(key)
        var v = MDB_val()
        return try result(mdb_cursor_get(handle, &k, &v, MDB_SET_RANGE), k, v)
    }

    /// The value stored under exactly `key`, or nil (`MDB_SET`). A cursor on a leaf that `key`
    /// falls inside looks only through that leaf; `Transaction.get` descends from the root each
    /// time. So a run of lookups of nearby keys, in either direction, is cheaper through a cursor;
    /// for scattered keys it costs two comparisons more each.
    public func value(at key: UnsafeRawBufferPointer) throws(LMDBError) -> UnsafeRawBufferPointer? {
        var k = MDB_val(key)
        var v = MDB_val()
        return try result(mdb_cursor_get(handle, &k, &v, MDB_SET), k, v)?.value
    }

    public func seek(atLeast key: [UInt8]) throws -> Entry? {
        try key.withUnsafeBytes { (key) in try seek(atLeast: key) }
    }

    /// The last entry whose key is less than or equal to `key`.
    public func seek(atMost key: [UInt8]) throws -> Entry? {
        guard let entry = try seek(atLeast: key) else { return try last() }
        if entry.key.elementsEqual(key) { return entry }
        return try previous()
    }

    private func move(_ op: MDB_cursor_op) throws(LMDBError) -> Entry? {
        var k = MDB_val()
        var v = MDB_val()
        return try result(mdb_cursor_get(handle, &k, &v, op), k, v)
    }

    private func result(_ rc: Int32, _ k: MDB_val, _ v: MDB_val) throws(LMDBError) -> Entry? {
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_cursor_get")
        return (UnsafeRawBufferPointer(k), UnsafeRawBufferPointer(v))
    }
}
