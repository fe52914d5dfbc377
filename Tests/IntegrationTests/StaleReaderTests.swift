import FolioHarness
import Foundation
import Testing

@Suite struct StaleReaderTests {
    /// A reader process killed inside its read transaction (here `mdb_dump`) leaves its slot in
    /// lock.mdb, and that slot pins its snapshot: no page freed after it could be reused, so
    /// data.mdb grew with every write until foliod restarted. foliod clears such slots as it writes.
    @Test func aReaderKilledInsideItsTransactionIsClearedWhileFoliodWrites() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            for index in 0..<300 {
                try connection.send([
                    "op": "create", "collection": "Note", "id": .string("n\(index)"),
                    "data": ["text": .string(String(repeating: "t", count: 200))],
                ])
            }
            for _ in 0..<300 { guard try connection.readResponse().isOK else { throw DaemonError("create failed") } }
            let reader = try #require(
                try StaleReader.leave(in: daemon.dataDirectory), "mdb_dump finished before it could be killed")
            #expect(try readers(of: daemon.dataDirectory).contains(reader), "the killed reader's slot is taken")
            let end = Date().addingTimeInterval(2)
            var version = 1
            while Date() < end {
                let response = try connection.request([
                    "op": "update", "collection": "Note", "id": "n0", "patch": ["v": .int(Int64(version))],
                ])
                guard response.isOK else { throw DaemonError("update failed: \(response)") }
                version += 1
            }
            #expect(
                try !readers(of: daemon.dataDirectory).contains(reader),
                "after 2 s of writes the dead reader's slot is still taken")
        }
    }

    /// The pids in the environment's reader table (`mdb_stat -r`, which clears none; it exits 1
    /// after printing the table).
    private func readers(of directory: String) throws -> [Int32] {
        let tool = try #require(StaleReader.path).replacingOccurrences(of: StaleReader.tool, with: "mdb_stat")
        let run = try CommandRun.run(tool, ["-r", directory])
        guard run.stdout.contains("Reader Table Status") else { throw DaemonError("\(run)") }
        return run.stdout.split(separator: "\n").compactMap { Int32($0.split(separator: " ").first ?? "") }
    }
}
