import FolioHarness
import FolioJSON
import Foundation
import Testing

/// A small tmpfs mounted for one test: needs the right to mount (root on our machines and CI).
private struct SmallFileSystem {
    let path: String

    static var canMount: Bool {
        (try? withTemporaryDirectory { directory in
            let mounted = try SmallFileSystem(at: directory, megabytes: 1)
            mounted.unmount()
            return true
        }) ?? false
    }

    init(at path: String, megabytes: Int) throws {
        let run = try CommandRun.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", path])
        guard run.status == 0 else { throw DaemonError("mount failed: \(run)") }
        self.path = path
    }

    func unmount() { _ = try? CommandRun.run("/bin/umount", ["-l", path]) }
}

/// When the disk fills, writes are refused with `unavailable`, reads and the daemon go on, and a
/// `verify` (which needs a scratch store) is refused rather than crashing foliod. A backup onto a
/// full disk is refused the same way and leaves nothing behind.
@Suite(.enabled(if: SmallFileSystem.canMount, "needs the right to mount a tmpfs"))
struct DiskFullTests {
    /// With the journal (the default) and without. The journal's ring takes 8 MiB of the 16 at once,
    /// and the pages of the last checkpoint stay pinned until the next, so fewer writes fit.
    @Test(arguments: [true, false])
    func aFullDiskRefusesWritesAndVerifyButKeepsServingAndRestarts(journal: Bool) throws {
        try withTemporaryDirectory { directory in
            let daemon = RunningDaemon(directory: directory, arguments: ["--journal", journal ? "on" : "off"])
            try FileManager.default.createDirectory(atPath: daemon.dataDirectory, withIntermediateDirectories: false)
            let disk = try SmallFileSystem(at: daemon.dataDirectory, megabytes: 16)
            let backups = directory + "/backups"
            try FileManager.default.createDirectory(atPath: backups, withIntermediateDirectories: false)
            let backupDisk = try SmallFileSystem(at: backups, megabytes: 1)
            defer {
                daemon.shutDown()
                disk.unmount()
                backupDisk.unmount()
            }
            try daemon.start()
            let connection = try daemon.connect()
            let payload = String(repeating: "q", count: 2000)
            var stored = 0
            var refusal: JSON?
            for _ in 0..<12_000 where refusal == nil {
                let response = try connection.request([
                    "op": "create", "collection": "Blob", "data": ["p": .string(payload)],
                ])
                if response.isOK { stored += 1 } else { refusal = response }
            }
            #expect(stored > (journal ? 100 : 1000), "some writes fit: \(stored)")
            #expect(refusal?.errorCode == "unavailable", "\(String(describing: refusal))")

            let verify = try connection.request(["op": "verify"])
            #expect(verify.errorCode == "unavailable", "\(verify)")
            #expect(daemon.isRunning)
            let stats = try #require(try connection.request(["op": "stats"]).result)
            #expect(stats["collections"]?["Blob"] == .int(Int64(stored)))
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: daemon.dataDirectory).filter {
                $0.hasPrefix("verify-")
            }
            #expect(leftovers.isEmpty, "scratch stores left behind: \(leftovers)")

            for attempt in 1...2 {
                let backup = try connection.request(["op": "backup", "directory": .string(backups + "/today")])
                #expect(backup.errorCode == "unavailable", "attempt \(attempt): \(backup)")
                #expect(try FileManager.default.contentsOfDirectory(atPath: backups + "/today").isEmpty)
            }
            connection.close()

            #expect(try daemon.stop() == 0)
            try daemon.start()
            let reopened = try daemon.connect()
            #expect(try reopened.request(["op": "stats"]).result?["collections"]?["Blob"] == .int(Int64(stored)))
        }
    }
}
