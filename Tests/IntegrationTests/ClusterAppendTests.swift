import FolioCluster
import FolioHarness
import Testing

/// `folio_append` (ClusterSchema) called as a node calls it, against a real PostgreSQL: what it
/// accepts and refuses of a proposal, by the keys it read and the sequence it was executed at.
@Suite(.enabled(if: PostgresServer.binaryDirectory != nil, "needs PostgreSQL (make deps installs it)"))
struct ClusterAppendTests {
    /// One write of `events` events changing `changes`, having read `reads`, executed after
    /// `snapshot`: its `decided` text (`first;head`, first 0 if refused).
    private static func append(
        _ connection: PostgresConnection, snapshot: Int, events: Int, reads: [String] = [], changes: [String] = []
    ) throws -> String? {
        func keys(_ names: [String]) -> String {
            "ARRAY[" + names.map { "convert_to('\($0)', 'UTF8')" }.joined(separator: ",") + "]::bytea[]"
        }
        func owners(_ count: Int) -> String {
            "ARRAY[" + Array(repeating: "1", count: count).joined(separator: ",") + "]::int[]"
        }
        let sql = """
            SELECT decided FROM folio_append(\(snapshot), '2026-12-07T00:00:00.000Z', ARRAY[false],
                \(keys(reads)), \(owners(reads.count)), \(keys(changes)), \(owners(changes.count)),
                \(owners(events)), array_fill('created'::text, ARRAY[\(events)]), array_fill('}'::text, ARRAY[\(events)]),
                array_fill(NULL::int, ARRAY[\(events)]), array_fill(NULL::text, ARRAY[\(events)]))
            WHERE decided IS NOT NULL
            """
        return try connection.execute(sql, timeout: 10).string(0, 0)
    }

    /// Runs `body` with a fresh PostgreSQL holding the cluster's tables and function, and a
    /// connection to it.
    private func withPreparedLog(_ body: (PostgresServer, PostgresConnection) throws -> Void) throws {
        let server = try PostgresServer(settings: ["fsync": "off"])
        defer { server.remove() }
        try ClusterLog(conninfo: server.conninfo, timeout: 10).prepare()
        let connection = try PostgresConnection(server.conninfo, timeout: 10)
        defer { connection.close() }
        try body(server, connection)
    }

    /// A write of three events changes key k: a node whose copy ends inside that write (after its
    /// first event) has not seen the change, and its proposal that read k is refused; one at the
    /// write's end is accepted. (The key took the write's first sequence, and the first was
    /// accepted: executed on a state the log never had.)
    @Test func aProposalFromInsideAWriteThatChangedWhatItReadIsRefused() throws {
        try withPreparedLog { _, connection throws in
            #expect(try Self.append(connection, snapshot: 0, events: 3, changes: ["k"]) == "1;3")
            #expect(try connection.execute("SELECT seq FROM folio_keys", timeout: 10).int64(0, 0) == 3)
            #expect(try Self.append(connection, snapshot: 1, events: 1, reads: ["k"]) == "0;3")
            #expect(try Self.append(connection, snapshot: 2, events: 1, reads: ["k"]) == "0;3")
            #expect(try Self.append(connection, snapshot: 1, events: 1, reads: ["other"]) == "4;4")
            #expect(try Self.append(connection, snapshot: 3, events: 1, reads: ["k"], changes: ["k"]) == "5;5")
            #expect(try connection.execute("SELECT seq FROM folio_keys WHERE key = 'k'", timeout: 10).int64(0, 0) == 5)
        }
    }

    /// A node whose copy is ahead of the log (PostgreSQL lost commits it had applied) gets an
    /// error of its own, SQLSTATE FOL01, whatever it read: nothing it executed is appended.
    @Test func aProposalFromBeyondTheLogsEndIsAnError() throws {
        try withPreparedLog { _, connection throws in
            #expect(try Self.append(connection, snapshot: 0, events: 2, changes: ["k"]) == "1;2")
            do {
                _ = try Self.append(connection, snapshot: 5, events: 1, changes: ["k"])
                Issue.record("a proposal after event 5 was decided on a log of 2 events")
            } catch PostgresError.server(let state, let message, _) {
                #expect(
                    state == "FOL01" && message.contains("after event 5") && message.contains("ends at event 2"),
                    "\(message)")
            }
            #expect(try connection.execute("SELECT seq FROM folio_head", timeout: 10).int64(0, 0) == 2)
            #expect(try Self.append(connection, snapshot: 2, events: 1, reads: ["k"]) == "3;3")
        }
    }

    /// A node refuses a log of another format before it touches the append function the log's
    /// own nodes call (its set-up replaced the function first, and only then read the format).
    @Test func aLogOfAnotherFormatIsRefusedBeforeItsFunctionIsReplaced() throws {
        try withPreparedLog { server, connection throws in
            try connection.execute("UPDATE folio_meta SET version = 99", timeout: 10)
            let source = "SELECT prosrc FROM pg_proc WHERE proname = 'folio_append'"
            let before = try connection.execute(source, timeout: 10).string(0, 0)
            try connection.execute(
                "UPDATE pg_proc SET prosrc = prosrc || ' ' WHERE proname = 'folio_append'", timeout: 10)
            let marked = try connection.execute(source, timeout: 10).string(0, 0)
            #expect(marked != before)
            do {
                try ClusterLog(conninfo: server.conninfo, timeout: 10).prepare()
                Issue.record("a log of format 99 was taken")
            } catch let error as ClusterLogError {
                #expect("\(error)".contains("format 99"), "\(error)")
            }
            #expect(try connection.execute(source, timeout: 10).string(0, 0) == marked, "the function was replaced")
        }
    }
}
