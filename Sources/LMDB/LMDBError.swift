import CLMDB

/// An error returned by an `mdb_*` call, named after the call that failed.
///
/// `code` is LMDB's return value (one of its `MDB_*` codes or an errno), kept as is so that codes this
/// binding does not name still survive; match a known one with `catch let e where e.code == .mapFull`.
public struct LMDBError: Error, CustomStringConvertible, Sendable {
    public struct Code: RawRepresentable, Equatable, Sendable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        public static let keyExists = Code(rawValue: MDB_KEYEXIST)
        public static let notFound = Code(rawValue: MDB_NOTFOUND)
        public static let corrupted = Code(rawValue: MDB_CORRUPTED)
        public static let panic = Code(rawValue: MDB_PANIC)
        public static let versionMismatch = Code(rawValue: MDB_VERSION_MISMATCH)
        public static let invalid = Code(rawValue: MDB_INVALID)
        public static let mapFull = Code(rawValue: MDB_MAP_FULL)
        public static let databasesFull = Code(rawValue: MDB_DBS_FULL)
        public static let readersFull = Code(rawValue: MDB_READERS_FULL)
        public static let transactionFull = Code(rawValue: MDB_TXN_FULL)
        public static let mapResized = Code(rawValue: MDB_MAP_RESIZED)
        public static let badValueSize = Code(rawValue: MDB_BAD_VALSIZE)
    }

    public let code: Code
    /// The C function that returned the code, e.g. `mdb_txn_commit`.
    public let call: String

    public init(code: Code, call: String) {
        self.code = code
        self.call = call
    }

    public var description: String {
        "\(call): \(String(cString: mdb_strerror(code.rawValue)))"
    }

    /// Whether this error means the disk (or the map) has no room: the operation may succeed later.
    public var isOutOfSpace: Bool {
        code == .mapFull || code.rawValue == 5 /* EIO, what 0.9.24 returns on a full disk */
            || code.rawValue == 28 /* ENOSPC */ || code.rawValue == 122 /* EDQUOT */
    }
}

/// Calls an `mdb_*` function and turns a non-zero result into an `LMDBError` naming it.
@inline(__always)
func check(_ call: @autoclosure () -> Int32, _ name: StaticString) throws(LMDBError) {
    let rc = call()
    if rc != 0 { throw LMDBError(code: .init(rawValue: rc), call: "\(name)") }
}
