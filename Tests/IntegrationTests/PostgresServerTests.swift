import FolioHarness
import Foundation
import Glibc
import Testing

/// The harness's PostgreSQL: servers side by side, cleaned up, and a failed start that says why.
@Suite(.enabled(if: PostgresServer.binaryDirectory != nil, "needs PostgreSQL (make deps installs it)"))
struct PostgresServerTests {
    @Test func serversRunSideBySideAndRemoveLeavesNothing() throws {
        let first = try PostgresServer()
        let second = try PostgresServer()
        defer { second.remove() }
        #expect(first.conninfo != second.conninfo)
        try first.psql("CREATE TABLE t (n int); INSERT INTO t VALUES (1), (2)")
        #expect(try first.psql("SELECT n, n * 10 FROM t ORDER BY n") == "1|10\n2|20")
        #expect(try second.psql("SELECT count(*) FROM pg_class WHERE relname = 't'") == "0")

        let postmaster = try #require(
            pid_t(
                try String(contentsOfFile: first.directory + "/data/postmaster.pid", encoding: .utf8).prefix {
                    $0 != "\n"
                }))
        first.remove()
        first.remove()
        #expect(!first.isRunning)
        // Ended: no such process, or a zombie (state Z) that init has yet to reap.
        let state = (try? String(contentsOfFile: "/proc/\(postmaster)/stat", encoding: .utf8)) ?? ""
        #expect(state.isEmpty || state.contains(") Z "), "the server's process ended: \(state)")
        #expect(!FileManager.default.fileExists(atPath: first.directory))
        #expect(second.isRunning)
        #expect(try second.psql("SELECT 1") == "1")
    }

    @Test func aServerThatCannotStartSaysWhyWithItsLog() throws {
        do {
            _ = try PostgresServer(settings: ["shared_buffers": "plenty"])
            Issue.record("a server with shared_buffers = 'plenty' started")
        } catch {
            let message = "\(error)"
            #expect(message.contains("did not start"))
            #expect(
                message.contains(#"invalid value for parameter "shared_buffers""#),
                "the server's log says why: \(message)")
        }
    }
}
