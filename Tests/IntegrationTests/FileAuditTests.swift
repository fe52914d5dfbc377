import FolioHarness
import FolioJSON
import FolioProtocol
import FolioStore
import Foundation
import Glibc
import Testing

/// Verify, backup, export and import of files against a real foliod and the real CLIs.
@Suite struct FileAuditTests {
    static let content = FileStoreTests.randomBytes(700_000, seed: 21)

    /// Makes the 0444 blob writable and flips one byte of it.
    static func corrupt(_ path: String, at offset: UInt64) throws {
        #expect(chmod(path, 0o644) == 0)
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        try handle.seek(toOffset: offset)
        let byte = try #require(try handle.read(upToCount: 1)?.first)
        try handle.seek(toOffset: offset)
        try handle.write(contentsOf: [byte ^ 0x01])
        try handle.close()
    }

    static func blobPath(_ daemon: RunningDaemon, _ bytes: [UInt8]) -> String {
        BlobStore(directory: daemon.dataDirectory + "/blobs").path(of: FileStoreTests.sha256(bytes))
    }

    @Test func verifyOnlineAndOfflineNamesTheFilesOfAChangedAndAMissingBlob() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let small = FileStoreTests.randomBytes(900, seed: 22)
            #expect(try FileStoreTests.put(connection, "reports/q1.pdf", Self.content).isOK)
            #expect(try FileStoreTests.put(connection, "reports/q1-copy.pdf", Self.content).isOK)
            #expect(try FileStoreTests.put(connection, "notes.txt", small).isOK)
            let intact = try #require(try connection.request(["op": "verify"]).result)
            #expect(intact["ok"] == true)
            #expect(intact["blobs"] == ["checked": 2, "bytes": .int(Int64(Self.content.count + small.count)), "bad": []])

            try Self.corrupt(Self.blobPath(daemon, Self.content), at: 600_000)
            #expect(unlink(Self.blobPath(daemon, small)) == 0)
            let report = try #require(try connection.request(["op": "verify"]).result)
            #expect(report["ok"] == false && report["mismatches"] == [] && report["chainBrokenAt"] == .null)
            let blobs = try #require(report["blobs"]?.objectValue)
            #expect(blobs["checked"] == 2 && blobs["bytes"] == .int(Int64(Self.content.count)))
            guard case .array(let bad)? = blobs["bad"] else {
                Issue.record("no bad blobs in \(report)")
                return
            }
            let byProblem = Dictionary(uniqueKeysWithValues: bad.compactMap { $0.objectValue }.map { ($0["problem"]?.stringValue ?? "", $0) })
            #expect(byProblem["changed"]?["sha256"] == .string(FileStoreTests.sha256(Self.content)))
            #expect(byProblem["changed"]?["names"] == ["reports/q1-copy.pdf", "reports/q1.pdf"])
            #expect(byProblem["missing"]?["names"] == ["notes.txt"])
            let cli = try CommandRun.run(Binaries.folio, ["verify"], environment: ["FOLIO_SOCKET": daemon.socketPath])
            #expect(cli.status == 1, "\(cli)")
            connection.close()
            #expect(try daemon.stop() == 0)

            let offline = try CommandRun.run(Binaries.foliod, ["verify", "--data", daemon.dataDirectory])
            #expect(offline.status == 1, "\(offline)")
            #expect(offline.stdout.contains("blobs      2 re-hashed (\(Self.content.count) bytes)"), "\(offline)")
            #expect(offline.stdout.contains("BAD BLOB changed: ") && offline.stdout.contains("bound to reports/q1-copy.pdf, reports/q1.pdf"), "\(offline)")
            #expect(offline.stdout.contains("BAD BLOB missing: ") && offline.stdout.contains("bound to notes.txt"), "\(offline)")
            #expect(offline.stdout.contains("FAILED"), "\(offline)")
        }
    }

    /// A backup on the same file system hard-links the blobs; started as a data directory on its
    /// own, with the originals gone, it serves every file byte for byte.
    @Test func aBackupAloneRestoresEveryFileAndLinksItsBlobs() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let small = FileStoreTests.randomBytes(900, seed: 23)
            #expect(try FileStoreTests.put(connection, "reports/q1.pdf", Self.content).isOK)
            #expect(try FileStoreTests.put(connection, "reports/same.pdf", Self.content).isOK)
            #expect(try FileStoreTests.put(connection, "notes.txt", small).isOK)
            #expect(try FileStoreTests.put(connection, "gone.txt", FileStoreTests.randomBytes(10, seed: 24)).isOK)
            #expect(try connection.request(["op": "file.delete", "name": "gone.txt"]).isOK)
            let restore = RunningDaemon(directory: daemon.directory + "/restore")
            let backup = try #require(try connection.request(["op": "backup", "directory": .string(restore.dataDirectory)]).result)
            #expect(backup["blobs"] == 2 && backup["linkedBlobs"] == 2, "\(backup)")
            #expect(backup["blobBytes"] == .int(Int64(Self.content.count + small.count)))
            let backupBlobs = BlobStore(directory: restore.dataDirectory + "/blobs")
            #expect(backupBlobs.storedBlobs().sorted() == [FileStoreTests.sha256(Self.content), FileStoreTests.sha256(small)].sorted())
            var original = stat()
            var copied = stat()
            #expect(stat(Self.blobPath(daemon, Self.content), &original) == 0)
            #expect(stat(backupBlobs.path(of: FileStoreTests.sha256(Self.content)), &copied) == 0)
            #expect(copied.st_ino == original.st_ino && copied.st_nlink == 2, "a hard link")
            connection.close()
            #expect(try daemon.stop() == 0)

            for sha256 in FileStoreTests.blobs(daemon) { #expect(unlink(BlobStore(directory: daemon.dataDirectory + "/blobs").path(of: sha256)) == 0) }
            #expect(stat(backupBlobs.path(of: FileStoreTests.sha256(Self.content)), &copied) == 0 && copied.st_nlink == 1)
            defer { restore.shutDown() }
            try restore.start()
            let restored = try restore.connect()
            #expect(try FileStoreTests.readBack(restored, "reports/q1.pdf").bytes == Self.content)
            #expect(try FileStoreTests.readBack(restored, "reports/same.pdf").bytes == Self.content)
            #expect(try FileStoreTests.readBack(restored, "notes.txt").bytes == small)
            #expect(try restored.request(["op": "verify"]).result?["ok"] == true)
        }
    }
}
