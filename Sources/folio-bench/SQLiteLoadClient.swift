import CSQLite

/// Stands for an app that keeps its records in SQLite: one connection per client on one database
/// file, in WAL mode, with one table `records(id INTEGER PRIMARY KEY, data TEXT)` holding the same
/// JSON payload Folio and Redis store.
///
/// Every statement is its own (autocommit) transaction, so each create is one commit, as each durable
/// Folio create is one: with `synchronous=FULL` the commit is on disk before the next operation
/// starts. SQLite runs in this process, so `send` executes the operations one after another and
/// queues their replies for `receive`; nothing crosses a socket.
///
/// Keys map to integer ids: `k<n>`, the pre-populated keys, is id n; any other key (the fresh keys
/// of named creates) is the negative of a 62-bit FNV-1a hash of its bytes, so it never meets the
/// ids SQLite assigns to creates without one (the largest id plus one).
final class SQLiteLoadClient: LoadClient {
    enum Synchronous: String {
        case full = "FULL"
        case normal = "NORMAL"
    }

    /// Many clients write one file: a writer that finds it locked waits (sqlite3_busy_timeout) this
    /// long before its statement fails.
    static let busyTimeoutMilliseconds: Int32 = 10_000

    /// SQLite copies a value bound with this destructor (`SQLITE_TRANSIENT`, a macro Swift cannot import).
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    private let database: OpaquePointer
    private let insert: OpaquePointer
    private let insertNamed: OpaquePointer
    private let select: OpaquePointer
    private let update: OpaquePointer
    private var replies: [Reply] = []
    private var nextReply = 0

    /// Opens (creating if need be) the database at `path` and the table, with the given durability.
    init(path: String, synchronous: Synchronous) throws {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &handle, flags, nil)
        guard let handle else { throw BenchError.database("sqlite3_open_v2 \(path)", "out of memory") }
        guard status == SQLITE_OK else {
            let message = String(cString: sqlite3_errmsg(handle))
            sqlite3_close_v2(handle)
            throw BenchError.database("sqlite3_open_v2 \(path)", message)
        }
        database = handle
        var prepared: [OpaquePointer] = []
        do {
            sqlite3_busy_timeout(handle, Self.busyTimeoutMilliseconds)
            try Self.execute(handle, "PRAGMA journal_mode=WAL; PRAGMA synchronous=\(synchronous.rawValue)")
            try Self.execute(handle, "CREATE TABLE IF NOT EXISTS records(id INTEGER PRIMARY KEY, data TEXT NOT NULL)")
            for sql in [
                "INSERT INTO records(data) VALUES(?1)",
                "INSERT INTO records(id, data) VALUES(?2, ?1)",
                "SELECT data FROM records WHERE id = ?2",
                // The merge patch Folio's update applies, and SQLite's own RFC 7396 function.
                #"UPDATE records SET data = json_patch(data, '{"done":true}') WHERE id = ?2"#,
            ] {
                prepared.append(try Self.prepare(handle, sql))
            }
        } catch {
            for statement in prepared { sqlite3_finalize(statement) }
            sqlite3_close_v2(handle)
            throw error
        }
        (insert, insertNamed, select, update) = (prepared[0], prepared[1], prepared[2], prepared[3])
    }

    deinit {
        for statement in [insert, insertNamed, select, update] { sqlite3_finalize(statement) }
        sqlite3_close_v2(database)
    }

    func send(_ operations: [Operation]) throws {
        if nextReply == replies.count {
            replies.removeAll(keepingCapacity: true)
            nextReply = 0
        }
        for operation in operations {
            switch operation.kind {
            case .create: replies.append(write(insert, operation.key))
            case .createNamed: replies.append(write(insertNamed, operation.key))
            case .update: replies.append(write(update, operation.key))
            case .get: replies.append(read(operation.key))
            case .createBatch:
                throw BenchError.setup("no SQLite peer for an atomic batch of creates: run it against foliod only")
            }
        }
    }

    func receive() throws -> Reply {
        guard nextReply < replies.count else { throw BenchError.setup("SQLite: a reply asked for before its request") }
        nextReply += 1
        return replies[nextReply - 1]
    }

    func describeServer() throws -> String {
        let journal = try Self.pragma(database, "journal_mode")
        let synchronous = try Self.pragma(database, "synchronous")
        let level = ["0": "off", "1": "normal", "2": "full", "3": "extra"][synchronous] ?? synchronous
        let version = String(cString: sqlite3_libversion())
        return "SQLite \(version) in process, journal_mode=\(journal), synchronous=\(level)"
    }

    /// Runs a write statement with the payload as ?1 and the key's id as ?2 (where it has them); one row
    /// must change.
    private func write(_ statement: OpaquePointer, _ key: Key) -> Reply {
        defer { sqlite3_reset(statement) }
        Payload.bytes.withUnsafeBufferPointer { bytes in
            _ = bytes.withMemoryRebound(to: CChar.self) { text in
                sqlite3_bind_text(statement, 1, text.baseAddress, Int32(text.count), Self.transient)
            }
        }
        // A create without an id has no ?2: SQLite assigns the id.
        if sqlite3_bind_parameter_count(statement) == 2 { sqlite3_bind_int64(statement, 2, Self.id(of: key)) }
        let status = sqlite3_step(statement)
        guard status == SQLITE_DONE else { return .failure(Self.message(database, status)) }
        return sqlite3_changes(database) == 1 ? .success : .failure("no row changed (the key does not exist)")
    }

    /// Looks the key up by primary key and checks the payload came back whole.
    private func read(_ key: Key) -> Reply {
        defer { sqlite3_reset(select) }
        sqlite3_bind_int64(select, 2, Self.id(of: key))
        let status = sqlite3_step(select)
        switch status {
        case SQLITE_ROW:
            let bytes = sqlite3_column_bytes(select, 0)
            return bytes == Payload.bytes.count ? .success : .failure("\(bytes) bytes, not \(Payload.bytes.count)")
        case SQLITE_DONE: return .failure("no row (the key does not exist)")
        default: return .failure(Self.message(database, status))
        }
    }

    private static func id(of key: Key) -> Int64 {
        if key.prefix == Key.existingPrefix { return Int64(key.number) }
        var bytes: [UInt8] = []
        key.append(to: &bytes)
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return -Int64(hash & (1 << 62 - 1)) - 1
    }

    private static func message(_ database: OpaquePointer, _ status: Int32) -> String {
        "\(String(cString: sqlite3_errstr(status))): \(String(cString: sqlite3_errmsg(database)))"
    }

    /// sqlite3_exec of statements that return no rows.
    private static func execute(_ database: OpaquePointer, _ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(database, sql, nil, nil, &error) == SQLITE_OK else {
            let message = error.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(database))
            sqlite3_free(error)
            throw BenchError.database(sql, message)
        }
    }

    private static func prepare(_ database: OpaquePointer, _ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(database, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw BenchError.database("sqlite3_prepare_v2 \(sql)", String(cString: sqlite3_errmsg(database)))
        }
        return statement
    }

    /// The value `PRAGMA name` reports, as text.
    private static func pragma(_ database: OpaquePointer, _ name: String) throws -> String {
        let statement = try prepare(database, "PRAGMA \(name)")
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW, let text = sqlite3_column_text(statement, 0) else {
            throw BenchError.database("PRAGMA \(name)", String(cString: sqlite3_errmsg(database)))
        }
        return String(cString: text)
    }
}
