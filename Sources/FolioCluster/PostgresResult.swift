import CPQ

/// The rows of one statement, read in place from libpq's `PGresult`, which it owns and clears when the
/// last copy goes. A result is read-only, so it may be read from any thread.
///
/// `execute` asks for every column in binary format; `executeScript` gets text format (the simple
/// query protocol has no other). The accessors read both. Rows and columns count from 0; an index out
/// of range, or `int64`/`bool` on a column of another type, is a programmer error (precondition).
public struct PostgresResult: Sendable {
    private let storage: Storage
    public let rowCount: Int
    public let columnCount: Int

    /// Takes ownership of `handle` (a `PGresult`).
    init(_ handle: OpaquePointer) {
        storage = Storage(handle)
        rowCount = Int(PQntuples(handle))
        columnCount = Int(PQnfields(handle))
    }

    public func isNull(_ row: Int, _ column: Int) -> Bool {
        checkIndex(row, column)
        return PQgetisnull(storage.handle, Int32(row), Int32(column)) == 1
    }

    /// The value's bytes as the server sent them (a bytea's bytes, a text's UTF-8); nil for NULL.
    public func bytes(_ row: Int, _ column: Int) -> [UInt8]? {
        withBytes(row, column) { Array($0.bindMemory(to: UInt8.self)) }
    }

    /// Calls `body` with the value's bytes in libpq's buffer (no copy; valid only inside `body`); nil
    /// for NULL.
    public func withBytes<R>(_ row: Int, _ column: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R? {
        guard !isNull(row, column) else { return nil }
        let value = PQgetvalue(storage.handle, Int32(row), Int32(column))
        let length = Int(PQgetlength(storage.handle, Int32(row), Int32(column)))
        return try body(UnsafeRawBufferPointer(start: value, count: length))
    }

    /// The value as UTF-8 text: right for text, varchar, char, name, json and enums in binary format,
    /// and for every type in text format. nil for NULL.
    public func string(_ row: Int, _ column: Int) -> String? {
        withBytes(row, column) { String(decoding: $0, as: UTF8.self) }
    }

    /// An int8, int4, int2 or oid column's value; nil for NULL.
    public func int64(_ row: Int, _ column: Int) -> Int64? {
        withBytes(row, column) { value in
            guard isBinary(column) else {
                guard let number = Int64(String(decoding: value, as: UTF8.self)) else {
                    preconditionFailure(
                        "column \(column) holds \(String(decoding: value, as: UTF8.self)), not an integer")
                }
                return number
            }
            switch (typeOID(column), value.count) {
            case (TypeOID.int8, 8): return Int64(bigEndian: value.loadUnaligned(as: Int64.self))
            case (TypeOID.int4, 4): return Int64(Int32(bigEndian: value.loadUnaligned(as: Int32.self)))
            case (TypeOID.int2, 2): return Int64(Int16(bigEndian: value.loadUnaligned(as: Int16.self)))
            case (TypeOID.oid, 4): return Int64(UInt32(bigEndian: value.loadUnaligned(as: UInt32.self)))
            case (let type, let count):
                preconditionFailure("column \(column) is of type OID \(type) (\(count) bytes), not an integer")
            }
        }
    }

    /// A boolean column's value; nil for NULL.
    public func bool(_ row: Int, _ column: Int) -> Bool? {
        withBytes(row, column) { value in
            guard isBinary(column) else { return value.first == UInt8(ascii: "t") }
            precondition(
                typeOID(column) == TypeOID.bool && value.count == 1,
                "column \(column) is of type OID \(typeOID(column)), not boolean")
            return value[0] != 0
        }
    }

    private func isBinary(_ column: Int) -> Bool { PQfformat(storage.handle, Int32(column)) == 1 }

    private func typeOID(_ column: Int) -> Oid { PQftype(storage.handle, Int32(column)) }

    private func checkIndex(_ row: Int, _ column: Int) {
        precondition(row >= 0 && row < rowCount, "row \(row) out of 0..<\(rowCount)")
        precondition(column >= 0 && column < columnCount, "column \(column) out of 0..<\(columnCount)")
    }

    /// Owns the `PGresult`; libpq never changes one after it is made, hence Sendable.
    private final class Storage: @unchecked Sendable {
        let handle: OpaquePointer
        init(_ handle: OpaquePointer) { self.handle = handle }
        deinit { PQclear(handle) }
    }
}

/// The OIDs of the built-in types this wrapper reads or sends (pg_type.dat), which never change.
enum TypeOID {
    static let bool: Oid = 16
    static let bytea: Oid = 17
    static let int8: Oid = 20
    static let int2: Oid = 21
    static let int4: Oid = 23
    static let oid: Oid = 26
}
