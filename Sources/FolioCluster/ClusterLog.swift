import FolioJSON
import FolioModel
import FolioStore
import Foundation
import Glibc

/// A node's connection to the cluster's log in PostgreSQL (docs/CLUSTER.md): the head, events by
/// sequence, and `folio_append` for the node's proposals. Used by one thread at a time.
///
/// Connects lazily and again after any failure, but not more often than every `retryInterval`
/// seconds: while PostgreSQL is down, every call fails at once with `unavailable`.
public final class ClusterLog: @unchecked Sendable {
    public struct Head: Sendable, Equatable {
        public let sequence: UInt64
        public let hash: [UInt8]
    }

    /// What the log decided of a group of proposals.
    public struct Decision: Sendable {
        /// Each write's first sequence, or nil: refused, because a key it read changed after its
        /// sequence (or it came after one refused).
        public let firstSequences: [UInt64?]
        /// The log's last sequence after the call.
        public let head: UInt64
        /// The log's first events after the proposals' snapshot (up to 1,000), to apply next.
        public let events: [LoggedEvent]
    }

    public let conninfo: String
    /// Seconds to connect, and to wait for any statement's answer.
    public let timeout: Double
    public let retryInterval: Double
    private var connection: PostgresConnection?
    private var lastFailure: Double = -1_000_000
    private var lastFailureReason = ""
    /// A connection was made and the tables checked once in this process.
    private var prepared = false

    public init(conninfo: String, timeout: Double = 2, retryInterval: Double = 0.1) {
        self.conninfo = conninfo
        self.timeout = timeout
        self.retryInterval = retryInterval
    }

    /// Creates the tables and the function where missing and checks the log's version. Throws
    /// `ClusterLogError`.
    public func prepare() throws {
        _ = try connected(until: now() + timeout)
    }

    /// The log's head.
    public func head() throws -> Head {
        let result = try run("SELECT seq, hash FROM folio_head WHERE one", [])
        guard result.rowCount == 1, let sequence = result.int64(0, 0), let hash = result.bytes(0, 1) else {
            throw ClusterLogError.unexpected("folio_head has no row")
        }
        return Head(sequence: UInt64(sequence), hash: hash)
    }

    /// The chain hash of event `sequence`, nil if the log has no such event.
    public func hash(of sequence: UInt64) throws -> [UInt8]? {
        let result = try run("SELECT hash FROM folio_events WHERE seq = $1", [.int(Int64(sequence))])
        return result.rowCount == 0 ? nil : result.bytes(0, 0)
    }

    /// Up to `limit` events after `sequence`, in order.
    public func events(after sequence: UInt64, limit: Int) throws -> [LoggedEvent] {
        let result = try run(
            "SELECT seq, canonical, hash FROM folio_events WHERE seq > $1 ORDER BY seq LIMIT $2",
            [.int(Int64(sequence)), .int(Int64(limit))],
            prepared: "folio_events_after")
        var events: [LoggedEvent] = []
        events.reserveCapacity(result.rowCount)
        for row in 0..<result.rowCount {
            guard let seq = result.int64(row, 0), let canonical = result.bytes(row, 1), let hash = result.bytes(row, 2)
            else {
                throw ClusterLogError.unexpected("folio_events has a row with a NULL")
            }
            events.append(LoggedEvent(sequence: UInt64(seq), canonical: canonical, hash: hash))
        }
        return events
    }

    /// Submits a group of writes proposed at `snapshot`, in order; see `ClusterSchema.appendFunction`.
    public func append(snapshot: UInt64, at: Timestamp, _ writes: [ProposedWrite]) throws -> Decision {
        // Sized up front: each array is allocated once.
        var readCount = 0
        var keyCount = 0
        var eventCount = 0
        for write in writes {
            readCount += write.reads.count
            keyCount += write.writes.count
            eventCount += write.events.count
        }
        var all: [Bool] = []
        all.reserveCapacity(writes.count)
        var reads: [[UInt8]] = []
        reads.reserveCapacity(readCount)
        var readOwners: [Int32] = []
        readOwners.reserveCapacity(readCount)
        var keys: [[UInt8]] = []
        keys.reserveCapacity(keyCount)
        var keyOwners: [Int32] = []
        keyOwners.reserveCapacity(keyCount)
        var eventOwners: [Int32] = []
        eventOwners.reserveCapacity(eventCount)
        var types: [String] = []
        types.reserveCapacity(eventCount)
        var tails: [[UInt8]] = []
        tails.reserveCapacity(eventCount)
        var causes: [Int32?] = []
        causes.reserveCapacity(eventCount)
        var rests: [[UInt8]] = []
        rests.reserveCapacity(eventCount)
        for (index, write) in writes.enumerated() {
            let owner = Int32(index + 1)
            all.append(write.readsEverything)
            for key in write.reads {
                reads.append(key.bytes)
                readOwners.append(owner)
            }
            for key in write.writes {
                keys.append(key.bytes)
                keyOwners.append(owner)
            }
            for event in write.events {
                eventOwners.append(owner)
                types.append(event.type)
                tails.append(event.tail)
                causes.append(event.causeIndex.map { Int32($0) })
                rests.append(event.rest)
            }
        }
        let result = try run(
            "SELECT * FROM folio_append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            [
                .int(Int64(snapshot)), .text(at.rfc3339), .boolArray(all), .byteaArray(reads), .int4Array(readOwners),
                .byteaArray(keys),
                .int4Array(keyOwners), .int4Array(eventOwners), .textArray(types), .textArray(tails),
                .int4Array(causes), .textArray(rests),
            ], prepared: "folio_append")
        guard result.rowCount >= 1, let answer = result.withBytes(0, 0, { Self.firstsAndHead($0) }) else {
            throw ClusterLogError.unexpected("folio_append returned no row")
        }
        var events: [LoggedEvent] = []
        events.reserveCapacity(result.rowCount - 1)
        for row in 1..<result.rowCount {
            guard let seq = result.int64(row, 1), let canonical = result.bytes(row, 2), let hash = result.bytes(row, 3)
            else {
                throw ClusterLogError.unexpected("folio_append returned an event row with a NULL")
            }
            events.append(LoggedEvent(sequence: UInt64(seq), canonical: canonical, hash: hash))
        }
        guard let (firsts, head) = answer else {
            throw ClusterLogError.unexpected("folio_append returned \(result.string(0, 0) ?? "")")
        }
        guard firsts.count == writes.count else {
            throw ClusterLogError.unexpected(
                "folio_append answered \(firsts.count) writes of \(writes.count): \(result.string(0, 0) ?? "")")
        }
        return Decision(firstSequences: firsts.map { $0 == 0 ? nil : $0 }, head: head, events: events)
    }

    /// `folio_append`'s first row, `first,first,...;head` (a first of 0: the write was refused), read
    /// as bytes: splitting it as a Swift string cost more than the rest of the call's answer.
    static func firstsAndHead(_ text: String) -> (firsts: [UInt64], head: UInt64)? {
        var text = text
        return text.withUTF8 { firstsAndHead(UnsafeRawBufferPointer($0)) }
    }

    /// The same, read from the answer's bytes where libpq holds them.
    static func firstsAndHead(_ text: UnsafeRawBufferPointer) -> (firsts: [UInt64], head: UInt64)? {
        var firsts: [UInt64] = []
        firsts.reserveCapacity(text.count / 2)
        var number: UInt64 = 0
        var digits = 0
        var sawSemicolon = false
        for byte in text {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                let (times10, over1) = number.multipliedReportingOverflow(by: 10)
                let (sum, over2) = times10.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
                guard !over1 && !over2 else { return nil }
                number = sum
                digits += 1
            case UInt8(ascii: ","), UInt8(ascii: ";"):
                guard !sawSemicolon, digits > 0 || (byte == UInt8(ascii: ";") && firsts.isEmpty) else { return nil }
                if digits > 0 { firsts.append(number) }
                number = 0
                digits = 0
                if byte == UInt8(ascii: ";") { sawSemicolon = true }
            default:
                return nil
            }
        }
        guard sawSemicolon, digits > 0 else { return nil }
        return (firsts, number)
    }

    public func close() {
        connection?.close()
        connection = nil
    }

    /// Runs `sql`; with `prepared`, as a statement of that name prepared once per connection (the
    /// calls every round makes, which PostgreSQL then does not parse and plan each time).
    private func run(_ sql: String, _ parameters: [PostgresValue?], prepared name: String? = nil) throws
        -> PostgresResult
    {
        // One timeout for the whole call, a reconnection included: a write waits no longer.
        let deadline = now() + timeout
        let connection = try connected(until: deadline)
        do {
            let left = max(0.001, deadline - now())
            if let name { return try connection.execute(prepared: name, sql, parameters, timeout: left) }
            return try connection.execute(sql, parameters, timeout: left)
        } catch {
            if connection.isBroken {
                if case PostgresError.unavailable(let reason) = error { failed(reason) } else { failed("\(error)") }
            }
            throw ClusterLogError(error)
        }
    }

    /// The connection, made again if it broke, by `deadline` (the first of the process, which
    /// creates the tables, may take up to 10 s).
    private func connected(until deadline: Double) throws -> PostgresConnection {
        if let connection, !connection.isBroken { return connection }
        connection?.close()
        connection = nil
        if now() - lastFailure < retryInterval {
            // Not tried again so soon after a failure: nothing is sent.
            throw ClusterLogError.unreachable(lastFailureReason)
        }
        let deadline = prepared ? deadline : max(deadline, now() + 10)
        func left() throws -> Double {
            let left = deadline - now()
            guard left > 0 else {
                throw PostgresError.unavailable("no time left of the \(timeout) s timeout to reconnect")
            }
            return left
        }
        do {
            let fresh = try PostgresConnection(conninfo, timeout: min(timeout, try left()))
            /// Refuses a log of another format (nil: no log yet).
            func checkFormat(_ stored: Int64?) throws {
                guard let stored, stored != Int64(ClusterSchema.version) else { return }
                fresh.close()
                let reason =
                    "the log in PostgreSQL has format \(stored); this foliod writes format \(ClusterSchema.version)"
                failed(reason)
                throw ClusterLogError.incompatible(reason)
            }
            // Before the set-up, which replaces the append function the log's other nodes call.
            if try fresh.execute("SELECT to_regclass('folio_meta') IS NOT NULL", [], timeout: try left()).bool(0, 0)
                == true
            {
                try checkFormat(
                    try fresh.execute("SELECT version FROM folio_meta WHERE one", [], timeout: try left()).int64(0, 0))
            }
            try fresh.executeScript(ClusterSchema.script, timeout: try left())
            let version = try fresh.execute("SELECT version FROM folio_meta WHERE one", [], timeout: try left())
            guard let stored = version.int64(0, 0) else {
                fresh.close()
                throw ClusterLogError.unexpected("folio_meta has no row")
            }
            try checkFormat(stored)
            connection = fresh
            prepared = true
            return fresh
        } catch PostgresError.unavailable(let reason) {
            failed(reason)
            throw ClusterLogError.unreachable(reason)
        } catch let error as PostgresError {
            failed("\(error)")
            throw ClusterLogError(error)
        }
    }

    private func failed(_ reason: String) {
        lastFailure = now()
        // Said again of later calls, which were not sent: what was unknown was the failed call's outcome.
        lastFailureReason = reason.replacingOccurrences(of: "; the outcome is unknown", with: "")
        connection?.close()
        connection = nil
    }

    private func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}

/// Why a call to the cluster's log failed.
public enum ClusterLogError: Error, CustomStringConvertible, Sendable {
    /// No connection to PostgreSQL could be made (or the last attempt failed a moment ago): the
    /// statement was not sent.
    case unreachable(String)
    /// The statement was sent and PostgreSQL did not answer in time, or the connection was lost:
    /// a write in flight may or may not have been stored.
    case unavailable(String)
    /// PostgreSQL refused a statement: a bug, or a log this foliod cannot use.
    case refused(String)
    /// The log is of another format.
    case incompatible(String)
    /// The log ends before the node's copy: it lost events the node applied (`folio_append`'s
    /// SQLSTATE FOL01).
    case behind(String)
    case unexpected(String)

    init(_ error: any Error) {
        switch error {
        case let error as ClusterLogError: self = error
        case PostgresError.unavailable(let reason): self = .unavailable(reason)
        case PostgresError.server("FOL01", let message, _): self = .behind(message)
        case let error as PostgresError: self = .refused("\(error)")
        default: self = .unexpected("\(error)")
        }
    }

    public var description: String {
        switch self {
        case .unreachable(let reason): "PostgreSQL cannot be reached: \(reason)"
        case .unavailable(let reason): "PostgreSQL did not answer: \(reason)"
        case .refused(let reason): "PostgreSQL refused a statement of the cluster's log: \(reason)"
        case .incompatible(let reason): reason
        case .behind(let reason): "the cluster's log lost events: \(reason)"
        case .unexpected(let reason): "the cluster's log answered unexpectedly: \(reason)"
        }
    }
}
