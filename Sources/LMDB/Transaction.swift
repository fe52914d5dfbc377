import CLMDB

/// A transaction handed to the closure of `Environment.read`, `write` or `Transaction.nested`.
///
/// It is valid only inside that closure, and so is every buffer it returns: an `MDB_val` from LMDB
/// points into the map and may move at the next write or at the end of the transaction.
public struct Transaction {
    let handle: OpaquePointer

    public struct PutFlags: OptionSet, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// `MDB_NOOVERWRITE`: fail with `.keyExists` if the key is present.
        public static let noOverwrite = PutFlags(rawValue: UInt32(MDB_NOOVERWRITE))
        /// `MDB_APPEND`: the key sorts after every key in the database (faster bulk load).
        public static let append = PutFlags(rawValue: UInt32(MDB_APPEND))
    }

    /// LMDB's number for the transaction: for a read, that of the commit it sees.
    public var id: Int { Int(mdb_txn_id(handle)) }

    /// Runs `body` in a child transaction (`mdb_txn_begin` with this one as parent): committed into this
    /// transaction if `body` returns, aborted, leaving this one unchanged, if it throws.
    public func nested<R>(_ body: (Transaction) throws -> R) throws -> R {
        var child: OpaquePointer?
        try check(mdb_txn_begin(mdb_txn_env(handle), handle, 0, &child), "mdb_txn_begin")
        let result: R
        do {
            result = try body(Transaction(handle: child!))
        } catch {
            mdb_txn_abort(child)
            throw error
        }
        try check(mdb_txn_commit(child), "mdb_txn_commit")
        return result
    }

    /// The value stored under `key` (`mdb_get`), or nil if there is none.
    public func get(_ db: Database, _ key: UnsafeRawBufferPointer) throws(LMDBError) -> UnsafeRawBufferPointer? {
        var k = MDB_val(key)
        var v = MDB_val()
        let rc = mdb_get(handle, db.handle, &k, &v)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_get")
        return UnsafeRawBufferPointer(v)
    }

    public func get(_ db: Database, _ key: [UInt8]) throws -> UnsafeRawBufferPointer? {
        try key.withUnsafeBytes { (key) in try get(db, key) }
    }

    /// Stores `value` under `key` (`mdb_put`).
    public func put(
        _ db: Database, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, flags: PutFlags = []
    ) throws(LMDBError) {
        var k = MDB_val(key)
        var v = MDB_val(value)
        try check(mdb_put(handle, db.handle, &k, &v, flags.rawValue), "mdb_put")
    }

    /// Stores a value of `count` bytes under `key`, written by `fill` where LMDB keeps it
    /// (`MDB_RESERVE`): no buffer of the caller's to assemble it in and copy. `fill` must write
    /// every byte, and must not touch the database (the space is valid until the next change).
    /// Not for a database with duplicates.
    public func put(
        _ db: Database, _ key: UnsafeRawBufferPointer, reserving count: Int, flags: PutFlags = [],
        _ fill: (UnsafeMutableRawBufferPointer) -> Void
    ) throws(LMDBError) {
        var k = MDB_val(key)
        var v = MDB_val(mv_size: count, mv_data: nil)
        try check(mdb_put(handle, db.handle, &k, &v, flags.rawValue | UInt32(MDB_RESERVE)), "mdb_put")
        fill(UnsafeMutableRawBufferPointer(start: v.mv_data, count: count))
    }

    public func put(_ db: Database, _ key: [UInt8], _ value: [UInt8], flags: PutFlags = []) throws {
        try key.withUnsafeBytes { (key) in
            try value.withUnsafeBytes { (value) in try put(db, key, value, flags: flags) }
        }
    }

    /// Removes `key` (`mdb_del`); returns whether it was there.
    @discardableResult
    public func delete(_ db: Database, _ key: UnsafeRawBufferPointer) throws(LMDBError) -> Bool {
        var k = MDB_val(key)
        let rc = mdb_del(handle, db.handle, &k, nil)
        if rc == MDB_NOTFOUND { return false }
        try check(rc, "mdb_del")
        return true
    }

    @discardableResult
    public func delete(_ db: Database, _ key: [UInt8]) throws -> Bool {
        try key.withUnsafeBytes { (key) in try delete(db, key) }
    }

    /// Removes every entry of `db`, keeping the database (`mdb_drop` with del = 0).
    public func empty(_ db: Database) throws(LMDBError) {
        try check(mdb_drop(handle, db.handle, 0), "mdb_drop")
    }

    /// Runs `body` with a cursor on `db` (`mdb_cursor_open`), closed when `body` returns.
    public func withCursor<R>(_ db: Database, _ body: (Cursor) throws -> R) throws -> R {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(handle, db.handle, &cursor), "mdb_cursor_open")
        defer { mdb_cursor_close(cursor) }
        return try body(Cursor(handle: cursor!))
    }

    public func statistics(_ db: Database) throws(LMDBError) -> DatabaseStatistics {
        var stat = MDB_stat()
        try check(mdb_stat(handle, db.handle, &stat), "mdb_stat")
        return DatabaseStatistics(stat)
    }
}

extension MDB_val {
    init(_ buffer: UnsafeRawBufferPointer) {
        self.init(mv_size: buffer.count, mv_data: UnsafeMutableRawPointer(mutating: buffer.baseAddress))
    }
}

extension UnsafeRawBufferPointer {
    init(_ val: MDB_val) {
        self.init(start: val.mv_data, count: val.mv_size)
    }
}
