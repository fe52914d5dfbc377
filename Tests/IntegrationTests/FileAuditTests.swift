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

    /// `reports/q1.pdf` and `reports/same.pdf` bound to `content`, `notes.txt` to the small content
    /// it returns.
    static func putThreeFiles(_ connection: TestConnection, seed: UInt64) throws -> [UInt8] {
        let small = FileStoreTests.randomBytes(900, seed: seed)
        #expect(try FileStoreTests.put(connection, "reports/q1.pdf", Self.content).isOK)
        #expect(try FileStoreTests.put(connection, "reports/same.pdf", Self.content).isOK)
        #expect(try FileStoreTests.put(connection, "notes.txt", small).isOK)
        return small
    }

    static func blobPath(_ daemon: RunningDaemon, _ bytes: [UInt8]) -> String {
        BlobStore(directory: daemon.dataDirectory + "/blobs").path(of: FileStoreTests.sha256(bytes))
    }

    @Test func verifyOnlineAndOfflineNamesTheFilesOfAChangedAndAMissingBlob() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let small = try Self.putThreeFiles(connection, seed: 22)
            let intact = try #require(try connection.request(["op": "verify"]).result)
            #expect(intact["ok"] == true)
            #expect(
                intact["blobs"] == ["checked": 2, "bytes": .int(Int64(Self.content.count + small.count)), "bad": []])

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
            let byProblem = Dictionary(
                uniqueKeysWithValues: bad.compactMap { $0.objectValue }.map { ($0["problem"]?.stringValue ?? "", $0) })
            #expect(byProblem["changed"]?["sha256"] == .string(FileStoreTests.sha256(Self.content)))
            #expect(byProblem["changed"]?["names"] == ["reports/q1.pdf", "reports/same.pdf"])
            #expect(byProblem["missing"]?["names"] == ["notes.txt"])
            let cli = try CommandRun.run(Binaries.folio, ["verify"], environment: ["FOLIO_SOCKET": daemon.socketPath])
            #expect(cli.status == 1, "\(cli)")
            connection.close()
            #expect(try daemon.stop() == 0)

            let offline = try CommandRun.run(Binaries.foliod, ["verify", "--data", daemon.dataDirectory])
            #expect(offline.status == 1, "\(offline)")
            #expect(offline.stdout.contains("blobs      2 re-hashed (\(Self.content.count) bytes)"), "\(offline)")
            #expect(
                offline.stdout.contains("BAD BLOB changed: ")
                    && offline.stdout.contains("bound to reports/q1.pdf, reports/same.pdf"), "\(offline)")
            #expect(
                offline.stdout.contains("BAD BLOB missing: ") && offline.stdout.contains("bound to notes.txt"),
                "\(offline)")
            #expect(offline.stdout.contains("FAILED"), "\(offline)")
        }
    }

    /// A backup on the same file system hard-links the blobs; started as a data directory on its
    /// own, with the originals gone, it serves every file byte for byte.
    @Test func aBackupAloneRestoresEveryFileAndLinksItsBlobs() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let small = try Self.putThreeFiles(connection, seed: 23)
            #expect(try FileStoreTests.put(connection, "gone.txt", FileStoreTests.randomBytes(10, seed: 24)).isOK)
            #expect(try connection.request(["op": "file.delete", "name": "gone.txt"]).isOK)
            let restore = RunningDaemon(directory: daemon.directory + "/restore")
            let backup = try #require(
                try connection.request(["op": "backup", "directory": .string(restore.dataDirectory)]).result)
            #expect(backup["blobs"] == 2 && backup["linkedBlobs"] == 2, "\(backup)")
            #expect(backup["blobBytes"] == .int(Int64(Self.content.count + small.count)))
            let backupBlobs = BlobStore(directory: restore.dataDirectory + "/blobs")
            #expect(
                backupBlobs.storedBlobs().sorted()
                    == [FileStoreTests.sha256(Self.content), FileStoreTests.sha256(small)].sorted())
            var original = stat()
            var copied = stat()
            #expect(stat(Self.blobPath(daemon, Self.content), &original) == 0)
            #expect(stat(backupBlobs.path(of: FileStoreTests.sha256(Self.content)), &copied) == 0)
            #expect(copied.st_ino == original.st_ino && copied.st_nlink == 2, "a hard link")
            connection.close()
            #expect(try daemon.stop() == 0)

            for sha256 in FileStoreTests.blobs(daemon) {
                #expect(unlink(BlobStore(directory: daemon.dataDirectory + "/blobs").path(of: sha256)) == 0)
            }
            #expect(
                stat(backupBlobs.path(of: FileStoreTests.sha256(Self.content)), &copied) == 0 && copied.st_nlink == 1)
            defer { restore.shutDown() }
            try restore.start()
            let restored = try restore.connect()
            #expect(try FileStoreTests.readBack(restored, "reports/q1.pdf").bytes == Self.content)
            #expect(try FileStoreTests.readBack(restored, "reports/same.pdf").bytes == Self.content)
            #expect(try FileStoreTests.readBack(restored, "notes.txt").bytes == small)
            #expect(try restored.request(["op": "verify"]).result?["ok"] == true)
        }
    }

    /// `folio export --with-files` then `foliod import` into a fresh directory: the same digest and
    /// every file byte for byte. Without the option, the export is the events and the end line only.
    @Test func anExportWithFilesImportsEveryFileAndOneWithoutIsUnchanged() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let small = try Self.putThreeFiles(connection, seed: 25)
            #expect(try FileStoreTests.put(connection, "empty", []).isOK)
            #expect(try connection.request(["op": "create", "collection": "Note", "data": ["file": "notes.txt"]]).isOK)
            let digest = try #require(try connection.request(["op": "stats"]).result?["digest"])
            let socket = ["FOLIO_SOCKET": daemon.socketPath]
            let plain = try CommandRun.run(Binaries.folio, ["export"], environment: socket)
            let full = try CommandRun.run(Binaries.folio, ["export", "--with-files"], environment: socket)
            #expect(plain.status == 0 && full.status == 0, "\(plain) \(full)")
            connection.close()

            let plainLines = plain.stdout.split(separator: "\n").map(String.init)
            let fullLines = full.stdout.split(separator: "\n").map(String.init)
            #expect(plainLines.count == 6 && !plain.stdout.contains("\"blob\""))
            #expect(
                try JSONParser.parse(Array(plainLines.last!.utf8)).objectValue?.keys.sorted() == [
                    "chainHead", "end", "lastSeq",
                ])
            let blobLines = fullLines.filter { $0.hasPrefix("{\"blob\"") }
            #expect(blobLines.count == 4, "two pieces of 700,000 bytes, one of 0 and one of 900")
            #expect(
                fullLines.filter { !$0.hasPrefix("{\"blob\"") }.dropLast() == plainLines.dropLast(), "the same events")
            #expect(fullLines.last!.hasSuffix(",\"files\":true}"))
            let firstPut = try #require(fullLines.firstIndex { $0.contains("\"type\":\"file.put\"") })
            #expect(
                fullLines[firstPut - 1].hasPrefix("{\"blob\":\"\(FileStoreTests.sha256(Self.content))\""),
                "content before the event naming it")

            let exportFile = daemon.directory + "/full.jsonl"
            try full.stdout.write(toFile: exportFile, atomically: true, encoding: .utf8)
            let restore = RunningDaemon(directory: daemon.directory + "/restore")
            let imported = try CommandRun.run(Binaries.foliod, ["import", "--data", restore.dataDirectory, exportFile])
            #expect(
                imported.status == 0
                    && imported.stdout.contains("blobs      3 (\(Self.content.count + small.count) bytes)"),
                "\(imported)")
            defer { restore.shutDown() }
            try restore.start()
            let restored = try restore.connect()
            #expect(try restored.request(["op": "stats"]).result?["digest"] == digest)
            #expect(try FileStoreTests.readBack(restored, "reports/q1.pdf").bytes == Self.content)
            #expect(try FileStoreTests.readBack(restored, "reports/same.pdf").bytes == Self.content)
            #expect(try FileStoreTests.readBack(restored, "empty").bytes == [])
            #expect(try FileStoreTests.readBack(restored, "notes.txt").bytes == small)
            #expect(try restored.request(["op": "verify"]).result?["ok"] == true)

            // Without the contents the events import, and the import says what it lacks.
            try plain.stdout.write(toFile: daemon.directory + "/plain.jsonl", atomically: true, encoding: .utf8)
            let eventsOnly = try CommandRun.run(
                Binaries.foliod,
                ["import", "--data", daemon.directory + "/events-only", daemon.directory + "/plain.jsonl"])
            #expect(eventsOnly.status == 0 && eventsOnly.stdout.contains("no content for 3 blob(s)"), "\(eventsOnly)")
        }
    }

    /// A changed byte of content, bad base64, and a `"files":true` export without a blob its files
    /// need: each refused, naming the line, and nothing left behind.
    @Test func anImportOfDamagedContentFailsNamingTheLine() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            #expect(try FileStoreTests.put(connection, "a.bin", Self.content).isOK)
            let full = try CommandRun.run(
                Binaries.folio, ["export", "--with-files"], environment: ["FOLIO_SOCKET": daemon.socketPath])
            #expect(full.status == 0, "\(full)")
            connection.close()
            var lines = full.stdout.split(separator: "\n").map(String.init)
            #expect(lines.count == 4 && lines[1].hasPrefix("{\"blob\""))
            func importing(_ lines: [String], _ name: String) throws -> CommandRun {
                let file = daemon.directory + "/\(name).jsonl"
                try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
                let run = try CommandRun.run(
                    Binaries.foliod, ["import", "--data", daemon.directory + "/\(name)", file])
                #expect(
                    !FileManager.default.fileExists(atPath: daemon.directory + "/\(name)/data.mdb"),
                    "nothing left behind")
                return run
            }
            let original = lines[1]
            let data = try #require(original.range(of: "\"data\":\""))
            let position = original.index(data.upperBound, offsetBy: 100)
            lines[1] = original.replacingCharacters(
                in: position...position, with: original[position] == "A" ? "B" : "A")
            let changed = try importing(lines, "changed")
            #expect(
                changed.status != 0
                    && changed.stderr.contains(
                        "line 2: blob \(FileStoreTests.sha256(Self.content)): its 700000 bytes hash to"),
                "\(changed)")
            lines[1] = original.replacingCharacters(in: position...position, with: "*")
            let badBase64 = try importing(lines, "base64")
            #expect(
                badBase64.status != 0
                    && badBase64.stderr.contains("line 2: field \"data\": invalid base64 at offset 100"), "\(badBase64)"
            )
            lines[1] = original
            let withoutContent = try importing(lines.enumerated().filter { $0.offset != 1 }.map(\.element), "lacking")
            #expect(
                withoutContent.status != 0
                    && withoutContent.stderr.contains("blob \(FileStoreTests.sha256(Self.content)) ends at byte"),
                "\(withoutContent)")
            let noBlobs = try importing(lines.filter { !$0.hasPrefix("{\"blob\"") }, "noblobs")
            #expect(
                noBlobs.status != 0
                    && noBlobs.stderr.contains("the export says it holds every file's content, but lacks"), "\(noBlobs)"
            )
        }
    }
}
