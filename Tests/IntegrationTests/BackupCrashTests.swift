import FolioHarness
import FolioJSON
import Foundation
import Testing

@Suite struct BackupCrashTests {
    /// A backup killed part-way must not leave a `data.mdb` that looks like a store but is cut
    /// short: foliod and `foliod verify` died of SIGBUS on such a file. Whatever `data.mdb` the
    /// directory holds after the kill opens and verifies.
    @Test func aBackupKilledPartWayLeavesNoTruncatedStore() throws {
        try withRunningDaemon { daemon in
            // About 40 MB, so that copying takes long enough for the kills to land inside it.
            let connection = try daemon.connect()
            let payload = String(repeating: "p", count: 2000)
            for batch in 0..<20 {
                for index in 0..<1000 {
                    try connection.send([
                        "op": "create", "collection": "Blob", "id": .string("b\(batch)-\(index)"),
                        "data": ["p": .string(payload)],
                    ])
                }
                for _ in 0..<1000 {
                    let response = try connection.readResponse()
                    guard response.isOK else { throw DaemonError("create failed: \(response)") }
                }
            }
            connection.close()
            for attempt in 0..<8 {
                let directory = daemon.directory + "/backup\(attempt)"
                let client = try daemon.connect()
                try client.send(["op": "backup", "directory": .string(directory)])
                usleep(UInt32(1_000 + attempt * 5_000))
                daemon.killHard()
                if FileManager.default.fileExists(atPath: directory + "/data.mdb") {
                    let verify = try CommandRun.run(Binaries.foliod, ["verify", "--data", directory], timeout: 120)
                    #expect(
                        verify.status == 0,
                        "a backup killed after \(1 + attempt * 5) ms left a data.mdb that does not verify: \(verify.status) \(verify.stderr.prefix(300))"
                    )
                }
                try daemon.start()
            }
        }
    }
}
