import CFolioSystem
import FolioCluster
import FolioHarness
import Foundation
import Glibc
import Testing

/// The libpq wrapper against a real PostgreSQL of each test's own (PostgresServer).
@Suite(.enabled(if: PostgresServer.binaryDirectory != nil, "needs PostgreSQL (make deps installs it)"))
struct PostgresConnectionTests {
    @Test func connectsAndAnswers() throws {
        try withPostgres { server in
            let connection = try PostgresConnection(server.conninfo, timeout: 5)
            let result = try connection.execute("SELECT 1 + 1, current_setting('client_encoding')", timeout: 5)
            #expect(result.rowCount == 1 && result.columnCount == 2)
            #expect(result.int64(0, 0) == 2)
            #expect(result.string(0, 1) == "UTF8")
            #expect(!connection.isBroken && connection.socket >= 0)
            #expect(try server.psql("SHOW fsync") == "off", "the settings reach postgresql.conf")
            connection.close()
            connection.close()
            #expect(connection.socket == -1)
            #expect(failure { try connection.execute("SELECT 1", timeout: 5) }?.isUnavailable == true)
        }
    }

    @Test func sendsParametersOfEveryKind() throws {
        try withPostgres { server in
            let connection = try PostgresConnection(server.conninfo, timeout: 5)
            let zeros: [UInt8] = [0, 1, 0, 0, 255, 0]
            let large = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ ($0 >> 8)) }
            let result = try connection.execute(
                "SELECT $1::text, $2, $3, $4, $5, length($5), sha256($5), $6::text IS NULL, $7 + 1, $8",
                [
                    .text("héllo 'quoted' ✓"), .int(.min), .int(.max), .bytes(zeros), .bytes(large), nil, .int(41),
                    .bytes([]),
                ],
                timeout: 10)
            #expect(result.string(0, 0) == "héllo 'quoted' ✓")
            #expect(result.int64(0, 1) == .min)
            #expect(result.int64(0, 2) == .max)
            #expect(result.bytes(0, 3) == zeros)
            #expect(result.bytes(0, 4) == large, "1 MiB of bytea, zero bytes included, there and back")
            #expect(result.int64(0, 5) == 1 << 20)
            #expect(result.bytes(0, 6)?.count == 32)
            #expect(result.bool(0, 7) == true, "nil is NULL")
            #expect(result.int64(0, 8) == 42)
            #expect(result.bytes(0, 9) == [], "empty bytes are an empty bytea, not NULL")
            // A text parameter's type is the server's to infer: it fits a jsonb column with no cast.
            try connection.execute("CREATE TEMP TABLE documents (doc jsonb)", timeout: 5)
            try connection.execute("INSERT INTO documents VALUES ($1)", [.text(#"{"a": 7}"#)], timeout: 5)
            #expect(try connection.execute("SELECT (doc ->> 'a')::int8 FROM documents", timeout: 5).int64(0, 0) == 7)
        }
    }

    @Test func aPreparedStatementIsPreparedOnceAndRunsWithEachCallsParameters() throws {
        try withPostgres { server in
            let connection = try PostgresConnection(server.conninfo, timeout: 5)
            let sql = "SELECT $1::text || '/' || ($2 + 1), cardinality($3::int4[])"
            for round in 0..<3 {
                let result = try connection.execute(
                    prepared: "pair", sql,
                    [.text("r\(round)"), .int(Int64(round)), .int4Array(Array(repeating: 7, count: round))], timeout: 5)
                #expect(result.string(0, 0) == "r\(round)/\(round + 1)")
                #expect(result.int64(0, 1) == Int64(round))
            }
            let statements = try connection.execute(
                "SELECT count(*) FROM pg_prepared_statements WHERE name = 'pair'", timeout: 5)
            #expect(statements.int64(0, 0) == 1, "prepared once, on the first call")
            // A server error in a prepared statement leaves it, and the connection, usable.
            #expect(throws: PostgresError.self) {
                try connection.execute(prepared: "pair", sql, [.text("x"), .int(.max), .int4Array([])], timeout: 5)
            }
            #expect(
                try connection.execute(prepared: "pair", sql, [.text("y"), .int(1), .int4Array([])], timeout: 5).string(
                    0, 0) == "y/2")
        }
    }

    /// Arrays in the binary format: empty, with zero bytes, with NULLs, of every element type.
    @Test func sendsArraysInBinary() throws {
        try withPostgres { server in
            let connection = try PostgresConnection(server.conninfo, timeout: 5)
            let result = try connection.execute(
                """
                SELECT array_length($1, 1), encode($1[2], 'hex'), $2[3], $3[1] + $3[2], $3[3] IS NULL, coalesce(array_length($4, 1), 0),
                       $5[1] AND NOT $5[2], array_to_string($2, '|'), array_to_string($6, '|'), array_length($6, 1)
                """,
                [
                    .byteaArray([[1], [0, 255, 0], []]),
                    .textArray([Array("a".utf8), Array("é ✓".utf8), Array("{\"x\",}".utf8)]),
                    .int4Array([40, 2, nil] as [Int32?]), .byteaArray([]), .boolArray([true, false]),
                    .textArray(["created", "é ✓", "", "a string longer than fifteen bytes"] as [String]),
                ],
                timeout: 5)
            #expect(result.int64(0, 0) == 3)
            #expect(result.string(0, 1) == "00ff00")
            #expect(result.string(0, 2) == "{\"x\",}")
            #expect(result.int64(0, 3) == 42)
            #expect(result.bool(0, 4) == true)
            #expect(result.int64(0, 5) == 0, "an empty array")
            #expect(result.bool(0, 6) == true)
            #expect(result.string(0, 7) == "a|é ✓|{\"x\",}")
            #expect(result.string(0, 8) == "created|é ✓||a string longer than fifteen bytes")
            #expect(result.int64(0, 9) == 4)
        }
    }

    @Test func readsBinaryAndTextResults() throws {
        try withPostgres { server in
            let connection = try PostgresConnection(server.conninfo, timeout: 5)
            let result = try connection.execute(
                """
                SELECT 9223372036854775807::int8, (-2147483648)::int4, (-32768)::int2, true, false, 'naïve'::text,
                       '\\x00ff0000'::bytea, NULL::int8, ''::bytea, 'v'::varchar
                """, timeout: 5)
            #expect(result.int64(0, 0) == .max)
            #expect(result.int64(0, 1) == -2_147_483_648)
            #expect(result.int64(0, 2) == -32768)
            #expect(result.bool(0, 3) == true)
            #expect(result.bool(0, 4) == false)
            #expect(result.string(0, 5) == "naïve")
            #expect(result.bytes(0, 6) == [0, 255, 0, 0])
            #expect(result.withBytes(0, 6) { Array($0) } == [0, 255, 0, 0])
            #expect(
                result.isNull(0, 7) && result.int64(0, 7) == nil && result.bytes(0, 7) == nil
                    && result.string(0, 7) == nil)
            #expect(!result.isNull(0, 8) && result.bytes(0, 8) == [])
            #expect(result.string(0, 9) == "v")

            let rows = try connection.execute("SELECT g, g * 2 FROM generate_series(1, $1) g", [.int(1000)], timeout: 5)
            #expect(rows.rowCount == 1000)
            #expect((0..<rows.rowCount).map { rows.int64($0, 1)! }.reduce(0, +) == 1000 * 1001)

            // A script's statements run in turn; its last result comes in text format, which the accessors read too.
            let counted = try connection.executeScript(
                "CREATE TABLE numbers (n int8); INSERT INTO numbers VALUES (1), (2); SELECT count(*), bool_and(n > 0), NULL FROM numbers",
                timeout: 5)
            #expect(counted.int64(0, 0) == 2)
            #expect(counted.bool(0, 1) == true)
            #expect(counted.isNull(0, 2))
        }
    }

    @Test func aServerErrorCarriesItsSQLStateAndLeavesTheConnectionUsable() throws {
        try withPostgres { server in
            let connection = try PostgresConnection(server.conninfo, timeout: 5)
            let division = failure { try connection.execute("SELECT 1 / $1", [.int(0)], timeout: 5) }
            #expect(division?.serverError?.sqlState == "22012")
            #expect(division?.serverError?.message == "division by zero")

            let raised = failure {
                try connection.execute(
                    "DO $$ BEGIN RAISE EXCEPTION 'the head moved' USING DETAIL = 'expected 4', ERRCODE = 'P0001'; END $$",
                    timeout: 5)
            }
            #expect(raised?.serverError?.sqlState == "P0001")
            #expect(raised?.serverError?.message == "the head moved")
            #expect(raised?.serverError?.detail == "expected 4")

            let script = failure {
                try connection.executeScript(
                    "CREATE TABLE t (k int PRIMARY KEY); INSERT INTO t VALUES (1), (1)", timeout: 5)
            }
            #expect(script?.serverError?.sqlState == "23505")
            #expect(script?.serverError?.detail == "Key (k)=(1) already exists.")
            #expect(
                failure { try connection.execute("SELECT $1::text", [.text("a\u{0}b")], timeout: 5) }?.serverError?
                    .sqlState == "22021",
                "text cannot hold a zero byte")

            #expect(!connection.isBroken)
            #expect(try connection.execute("SELECT $1::int8", [.int(7)], timeout: 5).int64(0, 0) == 7)
        }
    }

    @Test func aNotifyReachesTheListenerWithItsPayload() throws {
        try withPostgres { server in
            let listener = try PostgresConnection(server.conninfo, timeout: 5)
            let notifier = try PostgresConnection(server.conninfo, timeout: 5)
            try listener.execute("LISTEN folio_log", timeout: 5)
            let quiet = try elapsed {
                let arrived = try listener.notifications(timeout: 0.2)
                #expect(arrived.isEmpty)
            }
            #expect(quiet >= 0.19 && quiet < 2)

            try notifier.execute("SELECT pg_notify('folio_log', $1)", [.text("42")], timeout: 5)
            let arrived = try listener.notifications(timeout: 5)
            #expect(arrived.map(\.channel) == ["folio_log"])
            #expect(arrived.map(\.payload) == ["42"])

            // Both of one transaction, in order; and one that came in while the listener ran a statement.
            try notifier.executeScript("NOTIFY folio_log, 'a'; NOTIFY folio_log, 'b'", timeout: 5)
            var payloads: [String] = []
            let deadline = Date().addingTimeInterval(5)
            while payloads.count < 2 && Date() < deadline {
                payloads += try listener.notifications(timeout: 1).map(\.payload)
            }
            #expect(payloads == ["a", "b"])
            try notifier.execute("NOTIFY folio_log, 'during'", timeout: 5)
            usleep(100_000)
            try listener.execute("SELECT 1", timeout: 5)
            #expect(try listener.notifications(timeout: 1).map(\.payload) == ["during"])
        }
    }

    @Test func aStatementPastItsTimeoutIsCancelledAndBreaksTheConnection() throws {
        try withPostgres { server in
            let connection = try PostgresConnection(server.conninfo, timeout: 5)
            var thrown: PostgresError?
            let took = elapsed { thrown = failure { try connection.execute("SELECT pg_sleep(10)", timeout: 0.5) } }
            #expect(thrown?.isUnavailable == true)
            #expect("\(thrown.map { "\($0)" } ?? "")".contains("outcome is unknown"))
            #expect(took >= 0.45 && took < 2)
            #expect(connection.isBroken)
            let next = elapsed {
                #expect(failure { try connection.execute("SELECT 1", timeout: 5) }?.isUnavailable == true)
            }
            #expect(next < 0.5, "a broken connection fails at once")

            // The cancel (and the closed connection) end the sleeping backend long before its 10 s.
            let observer = try PostgresConnection(server.conninfo, timeout: 5)
            let deadline = Date().addingTimeInterval(5)
            var sleeping: Int64? = 1
            while sleeping != 0 && Date() < deadline {
                sleeping = try observer.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(10)'", timeout: 5
                )
                .int64(0, 0)
                usleep(20_000)
            }
            #expect(sleeping == 0)
        }
    }

    @Test func aStoppedServerIsUnavailableAtOnceAndARestartedOneAnswersAgain() throws {
        try withPostgres { server in
            let connection = try PostgresConnection(server.conninfo, timeout: 5)
            let listener = try PostgresConnection(server.conninfo, timeout: 5)
            try listener.execute("LISTEN folio_log", timeout: 5)
            try server.stop()
            #expect(!server.isRunning)

            let statement = elapsed {
                #expect(failure { try connection.execute("SELECT 1", timeout: 10) }?.isUnavailable == true)
            }
            #expect(statement < 2)
            #expect(connection.isBroken)
            let waiting = elapsed {
                #expect(failure { _ = try listener.notifications(timeout: 10) }?.isUnavailable == true)
            }
            #expect(waiting < 2)
            #expect(listener.isBroken)
            let connecting = elapsed {
                #expect(failure { _ = try PostgresConnection(server.conninfo, timeout: 10) }?.isUnavailable == true)
            }
            #expect(connecting < 2)

            try server.start()
            #expect(server.isRunning)
            let again = try PostgresConnection(server.conninfo, timeout: 5)
            #expect(try again.execute("SELECT 5", timeout: 5).int64(0, 0) == 5)
        }
    }

    /// A server that takes the connection and never answers (a socket nobody accepts on): the connect
    /// gives up at its deadline.
    @Test func aConnectToAServerThatDoesNotAnswerEndsAtItsTimeout() throws {
        try withTemporaryDirectory { directory in
            let socket = folio_unix_socket(0)
            defer { Glibc.close(socket) }
            #expect(folio_unix_bind(socket, directory + "/.s.PGSQL.5432") == 0 && listen(socket, 8) == 0)
            var thrown: PostgresError?
            let took = elapsed {
                thrown = failure {
                    _ = try PostgresConnection("host=\(directory) port=5432 user=postgres", timeout: 0.3)
                }
            }
            #expect(thrown?.isUnavailable == true)
            #expect(took >= 0.25 && took < 2)
        }
    }
}

/// Runs `body` with a fresh server (no fsync), removed afterwards.
private func withPostgres(_ body: (PostgresServer) throws -> Void) throws {
    let server = try PostgresServer(settings: ["fsync": "off"])
    defer { server.remove() }
    try body(server)
}

/// The PostgresError `body` threw; nil if it returned (another error is an issue).
private func failure(_ body: () throws -> Void) -> PostgresError? {
    do {
        try body()
    } catch let error as PostgresError {
        return error
    } catch {
        Issue.record("not a PostgresError: \(error)")
    }
    return nil
}

/// Seconds `body` took.
private func elapsed(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    let duration = ContinuousClock.now - start
    return Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

extension PostgresError {
    fileprivate var isUnavailable: Bool {
        if case .unavailable = self { true } else { false }
    }

    fileprivate var serverError: (sqlState: String, message: String, detail: String?)? {
        if case .server(let sqlState, let message, let detail) = self { (sqlState, message, detail) } else { nil }
    }
}
