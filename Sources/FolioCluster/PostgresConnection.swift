import CPQ
import Foundation
import Glibc

/// A statement parameter. `text` and `int` go in text format, `text` with its type left for the server
/// to infer from the statement (so it fits a text, jsonb or enum column) and `int` declared int8;
/// `bytes` go in binary format, declared bytea, so zero bytes travel as they are.
public enum PostgresValue: Sendable {
    case text(String)
    case int(Int64)
    case bytes([UInt8])
    /// A one-dimensional array in PostgreSQL's binary format, declared of `type` (an array type's
    /// OID): many values in one parameter, with nothing for the server to parse.
    case array(type: UInt32, bytes: [UInt8])

    /// `bytea[]`.
    public static func byteaArray(_ elements: [[UInt8]]) -> PostgresValue {
        .array(
            type: 1001,
            bytes: binaryArray(of: TypeOID.bytea, elements.count, elementBytes: elements.reduce(0) { $0 + $1.count }) {
                index, out in
                copy(elements[index], to: out)
            })
    }

    /// `text[]` of UTF-8 bytes (without zero bytes).
    public static func textArray(_ elements: [[UInt8]]) -> PostgresValue {
        .array(
            type: 1009,
            bytes: binaryArray(of: 25, elements.count, elementBytes: elements.reduce(0) { $0 + $1.count }) {
                index, out in
                copy(elements[index], to: out)
            })
    }

    /// `text[]` of strings (without zero bytes).
    public static func textArray(_ elements: [String]) -> PostgresValue {
        .array(
            type: 1009,
            bytes: binaryArray(of: 25, elements.count, elementBytes: elements.reduce(0) { $0 + $1.utf8.count }) {
                index, out in
                var element = elements[index]
                return element.withUTF8 { copy(UnsafeRawBufferPointer($0), to: out) }
            })
    }

    /// `int4[]`.
    public static func int4Array(_ elements: [Int32]) -> PostgresValue {
        .array(
            type: 1007,
            bytes: binaryArray(of: TypeOID.int4, elements.count, elementBytes: 4 * elements.count) { index, out in
                out.storeBytes(of: elements[index].bigEndian, as: Int32.self)
                return 4
            })
    }

    /// `int4[]` with NULLs.
    public static func int4Array(_ elements: [Int32?]) -> PostgresValue {
        .array(
            type: 1007,
            bytes: binaryArray(of: TypeOID.int4, elements.count, elementBytes: 4 * elements.count) { index, out in
                guard let element = elements[index] else { return nil }
                out.storeBytes(of: element.bigEndian, as: Int32.self)
                return 4
            })
    }

    /// `bool[]`.
    public static func boolArray(_ elements: [Bool]) -> PostgresValue {
        .array(
            type: 1000,
            bytes: binaryArray(of: TypeOID.bool, elements.count, elementBytes: elements.count) { index, out in
                out.storeBytes(of: elements[index] ? 1 : 0, as: UInt8.self)
                return 1
            })
    }

    /// The binary array format: dimensions, a no-NULL flag, the element type, then each element as
    /// its length and its bytes (an empty array has no dimension). `element` writes the bytes of
    /// element `index` at `out` and returns how many, or returns nil, writing nothing, for a NULL;
    /// `elementBytes` is at most what they take in all. The array is allocated once and written in
    /// place (an array for each element and each length, then an append for each, cost a cluster
    /// node's writing thread 5%, then 3% of its instructions).
    private static func binaryArray(
        of element: Oid, _ count: Int, elementBytes: Int,
        _ write: (_ index: Int, _ out: UnsafeMutableRawPointer) -> Int?
    ) -> [UInt8] {
        let capacity = 20 + 4 * count + elementBytes
        return [UInt8](unsafeUninitializedCapacity: capacity) { buffer, initialized in
            let base = UnsafeMutableRawPointer(buffer.baseAddress!)
            func put(_ value: UInt32, at offset: Int) {
                base.storeBytes(of: value.bigEndian, toByteOffset: offset, as: UInt32.self)
            }
            put(count == 0 ? 0 : 1, at: 0)
            put(0, at: 4)  // no NULL, until one is written
            put(element, at: 8)
            guard count > 0 else {
                initialized = 12
                return
            }
            put(UInt32(count), at: 12)
            put(1, at: 16)
            var at = 20
            for index in 0..<count {
                if let length = write(index, base + at + 4) {
                    precondition(at + 4 + length <= capacity, "an array element larger than its size given")
                    put(UInt32(length), at: at)
                    at += 4 + length
                } else {
                    put(UInt32.max, at: at)  // length -1: NULL
                    put(1, at: 4)
                    at += 4
                }
            }
            initialized = at
        }
    }

    /// Copies `bytes` to `out`; returns how many.
    private static func copy(_ bytes: [UInt8], to out: UnsafeMutableRawPointer) -> Int {
        bytes.withUnsafeBytes { copy($0, to: out) }
    }

    private static func copy(_ bytes: UnsafeRawBufferPointer, to out: UnsafeMutableRawPointer) -> Int {
        if let source = bytes.baseAddress, bytes.count > 0 { out.copyMemory(from: source, byteCount: bytes.count) }
        return bytes.count
    }
}

/// One `NOTIFY` received on a channel the connection `LISTEN`s to.
public struct PostgresNotification: Sendable {
    public let channel: String
    public let payload: String
}

/// One libpq connection (`PGconn`), synchronous: each call returns once the server answered or its
/// timeout passed. Used by one thread at a time; it may move between threads (libpq allows that of a
/// connection nobody else is using), hence `@unchecked Sendable`.
///
/// Every wait is poll(2) on the socket in libpq's non-blocking mode, so no call outlives its timeout:
/// not the connect, not a statement whose server went away, not a large parameter the server does not
/// read. A connection that timed out or was lost is broken for good and closed; its owner makes a new
/// one. Server notices (e.g. "relation already exists, skipping") are dropped.
public final class PostgresConnection: @unchecked Sendable {
    private var handle: OpaquePointer?
    /// True once the connection failed (lost, or a statement timed out); the owner then makes a new one.
    public private(set) var isBroken = false
    /// The statements prepared on this connection (`execute(prepared:...)`), by name.
    private var prepared: Set<String> = []

    /// Connects (`PQconnectStartParams`, `PQconnectPoll`) within `timeout` seconds, with client_encoding
    /// UTF8 whatever `conninfo` says. `conninfo` is a libpq connection string or URI. libpq looks a host
    /// name up with a blocking getaddrinfo that the timeout cannot bound; `hostaddr` avoids the lookup.
    public init(_ conninfo: String, timeout: Double) throws(PostgresError) {
        let deadline = Deadline(seconds: timeout)
        // A dbname that looks like a connection string is expanded in its place (expand_dbname), so
        // client_encoding, after it, wins over one the string may carry.
        let keywords: [UnsafeMutablePointer<CChar>?] = [strdup("dbname"), strdup("client_encoding"), nil]
        let values: [UnsafeMutablePointer<CChar>?] = [strdup(conninfo), strdup("UTF8"), nil]
        defer { for string in keywords + values { free(string) } }
        let started = PQconnectStartParams(keywords.map { UnsafePointer($0) }, values.map { UnsafePointer($0) }, 1)
        guard let started else { throw .unavailable("cannot connect: libpq is out of memory") }
        handle = started
        var status = PQstatus(started) == CONNECTION_BAD ? PGRES_POLLING_FAILED : PGRES_POLLING_WRITING
        while status != PGRES_POLLING_OK {
            let events: Int32
            switch status {
            case PGRES_POLLING_READING: events = POLLIN
            case PGRES_POLLING_WRITING: events = POLLOUT
            default: throw fail("cannot connect: \(errorMessage)")
            }
            guard try waitForSocket(events, until: deadline, doing: "connecting") else {
                throw fail("cannot connect: no answer within \(timeout) s")
            }
            status = PQconnectPoll(started)
        }
        guard PQsetnonblocking(started, 1) == 0 else { throw fail("cannot connect: PQsetnonblocking: \(errorMessage)") }
        PQsetNoticeProcessor(started, { _, _ in }, nil)
    }

    deinit { close() }

    /// The socket, for a caller that wants to poll it itself; -1 once closed.
    public var socket: Int32 { handle.map { PQsocket($0) } ?? -1 }

    /// Runs one statement (`PQsendQueryParams`), its results in binary format, waiting at most `timeout`
    /// seconds. On timeout the statement is cancelled (`PQcancel`) and the connection broken; a lost
    /// connection breaks it too; both throw `.unavailable`, and the outcome is unknown. A server error
    /// throws `.server` and leaves the connection usable. A text parameter with a zero byte throws what
    /// the server would (`.server`, SQLSTATE 22021) without sending anything.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [PostgresValue?] = [], timeout: Double) throws(PostgresError)
        -> PostgresResult
    {
        let deadline = Deadline(seconds: timeout)
        let encoded = try Encoded(parameters)
        return try run(deadline, timeout: timeout) { connection in
            encoded.withValues { values in
                PQsendQueryParams(
                    connection, sql, Int32(parameters.count), encoded.types, values, encoded.lengths, encoded.formats, 1
                )
            }
        }
    }

    /// Runs `sql` as `execute` does, as the statement `name` prepared on this connection: the
    /// first call prepares it (`PQsendPrepare`, with the types of its parameters), and every call
    /// runs it (`PQsendQueryPrepared`), so the server does not parse and plan it each time.
    @discardableResult
    public func execute(prepared name: String, _ sql: String, _ parameters: [PostgresValue?], timeout: Double)
        throws(PostgresError)
        -> PostgresResult
    {
        let deadline = Deadline(seconds: timeout)
        let encoded = try Encoded(parameters)
        if !prepared.contains(name) {
            _ = try run(deadline, timeout: timeout) {
                PQsendPrepare($0, name, sql, Int32(parameters.count), encoded.types)
            }
            prepared.insert(name)
        }
        return try run(deadline, timeout: timeout) { connection in
            encoded.withValues { values in
                PQsendQueryPrepared(
                    connection, name, Int32(parameters.count), values, encoded.lengths, encoded.formats, 1)
            }
        }
    }

    /// Parameters as libpq takes them: every value in one buffer, text ones NUL-terminated, and
    /// each parameter's type, format and span in it.
    private struct Encoded {
        var buffer: [UInt8] = []
        var spans: [(offset: Int, length: Int)?] = []
        var types: [Oid] = []
        var formats: [Int32] = []
        var lengths: [Int32] { spans.map { Int32($0?.length ?? 0) } }

        /// A text parameter with a zero byte throws what the server would (`.server`, SQLSTATE 22021).
        init(_ parameters: [PostgresValue?]) throws(PostgresError) {
            precondition(
                parameters.count <= Int(UInt16.max), "\(parameters.count) parameters: the protocol allows 65535")
            for (index, parameter) in parameters.enumerated() {
                let offset = buffer.count
                switch parameter {
                case nil:
                    types.append(0)
                    formats.append(0)
                    spans.append(nil)
                    continue
                case .text(let text):
                    guard !text.utf8.contains(0) else {
                        throw .server(
                            sqlState: "22021",
                            message: "parameter $\(index + 1) has a zero byte, which text cannot hold", detail: nil)
                    }
                    buffer += text.utf8
                    buffer.append(0)
                    types.append(0)
                    formats.append(0)
                case .int(let number):
                    buffer += String(number).utf8
                    buffer.append(0)
                    types.append(TypeOID.int8)
                    formats.append(0)
                case .bytes(let bytes):
                    buffer += bytes
                    types.append(TypeOID.bytea)
                    formats.append(1)
                case .array(let type, let bytes):
                    buffer += bytes
                    types.append(Oid(type))
                    formats.append(1)
                }
                spans.append((offset, buffer.count - offset))
            }
            buffer.append(0)  // so the buffer has an address even when every value is empty
        }

        /// Calls `body` with each parameter's address (nil: NULL).
        func withValues<R>(_ body: ([UnsafePointer<CChar>?]) -> R) -> R {
            buffer.withUnsafeBufferPointer { bytes in
                let base = UnsafeRawPointer(bytes.baseAddress!)
                return body(spans.map { span in span.map { (base + $0.offset).assumingMemoryBound(to: CChar.self) } })
            }
        }
    }

    /// Runs several statements without parameters (`PQsendQuery`), e.g. a schema script, under the same
    /// rules as `execute`. Returns the last statement's result, in text format; the first error stops
    /// the script and is thrown.
    @discardableResult
    public func executeScript(_ sql: String, timeout: Double) throws(PostgresError) -> PostgresResult {
        try run(Deadline(seconds: timeout), timeout: timeout) { PQsendQuery($0, sql) }
    }

    /// Waits up to `timeout` seconds for notifications on the channels this connection `LISTEN`s to
    /// (`PQconsumeInput`, `PQnotifies`); returns as soon as some arrived, or empty. Throws
    /// `.unavailable` if the connection is lost.
    public func notifications(timeout: Double) throws(PostgresError) -> [PostgresNotification] {
        let deadline = Deadline(seconds: timeout)
        let connection = try usableHandle()
        while true {
            guard PQconsumeInput(connection) == 1 else { throw fail("connection lost: \(errorMessage)") }
            var arrived: [PostgresNotification] = []
            while let notification = PQnotifies(connection) {
                arrived.append(
                    PostgresNotification(
                        channel: String(cString: notification.pointee.relname),
                        payload: String(cString: notification.pointee.extra)))
                PQfreemem(notification)
            }
            if !arrived.isEmpty { return arrived }
            guard try waitForSocket(POLLIN, until: deadline, doing: "waiting for notifications") else { return [] }
        }
    }

    /// Closes the connection (`PQfinish`); idempotent. Statements then throw `.unavailable`.
    public func close() {
        if let handle { PQfinish(handle) }
        handle = nil
    }

    /// Sends with `send`, then reads every result until libpq has none left, so the connection is ready
    /// for the next statement. Throws the first error; returns the last result.
    private func run(_ deadline: Deadline, timeout: Double, _ send: (OpaquePointer) -> Int32) throws(PostgresError)
        -> PostgresResult
    {
        let connection = try usableHandle()
        guard send(connection) == 1 else { throw fail("cannot send the statement: \(errorMessage)") }
        // A large statement may not fit the socket's buffer: libpq sends the rest as the server reads.
        while true {
            let flushed = PQflush(connection)
            if flushed == 0 { break }
            guard flushed == 1 else {
                throw fail("connection lost while sending: \(errorMessage); the outcome is unknown")
            }
            guard try waitForSocket(POLLIN | POLLOUT, until: deadline, doing: "sending") else {
                throw timedOut(timeout)
            }
            guard PQconsumeInput(connection) == 1 else {
                throw fail("connection lost: \(errorMessage); the outcome is unknown")
            }
        }
        var last: PostgresResult?
        var firstError: (sqlState: String?, message: String, detail: String?)?
        while true {
            while PQisBusy(connection) == 1 {
                guard try waitForSocket(POLLIN, until: deadline, doing: "waiting for the answer") else {
                    throw timedOut(timeout)
                }
                guard PQconsumeInput(connection) == 1 else {
                    throw fail("connection lost: \(errorMessage); the outcome is unknown")
                }
            }
            guard let result = PQgetResult(connection) else { break }
            switch PQresultStatus(result) {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
                last = PostgresResult(result)
            case PGRES_COPY_IN, PGRES_COPY_OUT, PGRES_COPY_BOTH:
                PQclear(result)
                throw fail("COPY is not supported; the connection is closed")
            default:
                if firstError == nil {
                    func field(_ code: Int32) -> String? {
                        PQresultErrorField(result, code).map { String(cString: $0) }
                    }
                    let message = String(cString: PQresultErrorMessage(result)).trimmingCharacters(
                        in: .whitespacesAndNewlines)
                    firstError = (
                        field(DiagnosticField.sqlState), field(DiagnosticField.message) ?? message,
                        field(DiagnosticField.detail)
                    )
                }
                PQclear(result)
            }
        }
        if PQstatus(connection) == CONNECTION_BAD {
            throw fail("connection lost: \(errorMessage); the outcome is unknown")
        }
        if let firstError {
            // An error without SQLSTATE is libpq's own (out of memory, a protocol violation), not the server's.
            guard let sqlState = firstError.sqlState else {
                throw fail("\(firstError.message); the outcome is unknown")
            }
            throw .server(sqlState: sqlState, message: firstError.message, detail: firstError.detail)
        }
        guard let last else { throw fail("the server sent no result; the outcome is unknown") }
        return last
    }

    private func usableHandle() throws(PostgresError) -> OpaquePointer {
        guard let handle else { throw .unavailable(isBroken ? "the connection is broken" : "the connection is closed") }
        return handle
    }

    /// poll(2) on the socket for `events` until `deadline`, retrying EINTR; false once the deadline
    /// passed. POLLERR and POLLHUP count as ready: the libpq call that follows finds out what happened.
    private func waitForSocket(_ events: Int32, until deadline: Deadline, doing activity: String) throws(PostgresError)
        -> Bool
    {
        let socket = socket
        guard socket >= 0 else { throw fail("\(activity): the connection has no socket: \(errorMessage)") }
        var entry = pollfd(fd: socket, events: Int16(events), revents: 0)
        while true {
            let left = deadline.millisecondsLeft
            let ready = poll(&entry, 1, left)
            if ready > 0 { return true }
            if ready == 0 && left == 0 { return false }
            if ready < 0 && errno != EINTR { throw fail("\(activity): poll: \(String(cString: strerror(errno)))") }
        }
    }

    /// Cancels the statement in flight and breaks the connection. `PQcancel` opens a connection of its
    /// own and blocks for as long as the network makes it, so it runs on a thread of its own: the
    /// caller's timeout holds even when the server cannot be reached.
    private func timedOut(_ timeout: Double) -> PostgresError {
        if let handle, let cancel = PQgetCancel(handle) {
            let request = CancelRequest(cancel)
            Thread.detachNewThread { request.send() }
        }
        return fail("no answer within \(timeout) s; sent a cancel; the outcome is unknown")
    }

    /// Marks the connection broken and closes it: a later statement throws at once instead of waiting on
    /// a connection that cannot answer, and the server rolls back an open transaction.
    private func fail(_ reason: String) -> PostgresError {
        isBroken = true
        close()
        return .unavailable(reason)
    }

    /// libpq's last error message, on one line.
    private var errorMessage: String {
        guard let handle else { return "closed" }
        return String(cString: PQerrorMessage(handle)).split(whereSeparator: \.isNewline).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        .joined(separator: " ")
    }
}

/// postgres_ext.h's `PG_DIAG_*` codes for `PQresultErrorField`: character macros, which Swift does not import.
private enum DiagnosticField {
    static let sqlState = Int32(UInt8(ascii: "C"))
    static let message = Int32(UInt8(ascii: "M"))
    static let detail = Int32(UInt8(ascii: "D"))
}

/// A `PGcancel` (what `PQcancel` needs, copied from the connection), freed once sent.
private final class CancelRequest: @unchecked Sendable {
    private let handle: OpaquePointer

    init(_ handle: OpaquePointer) { self.handle = handle }
    deinit { PQfreeCancel(handle) }

    func send() {
        var error = [CChar](repeating: 0, count: 256)
        _ = PQcancel(handle, &error, Int32(error.count))
    }
}

/// A point in time on the monotonic clock, for poll(2)'s timeout.
private struct Deadline {
    private let end: ContinuousClock.Instant

    init(seconds: Double) { end = .now + .seconds(max(0, seconds)) }

    /// Milliseconds until the end, rounded up so a poll never ends before it; 0 once it passed.
    var millisecondsLeft: Int32 {
        let left = (end - .now).components
        guard left.seconds >= 0 && (left.seconds > 0 || left.attoseconds > 0) else { return 0 }
        let milliseconds = left.seconds * 1000 + (left.attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: milliseconds)
    }
}
