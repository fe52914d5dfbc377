import FolioHarness
import FolioJSON
import FolioModel
import FolioProtocol
import FolioStore
import Foundation
import Glibc
import Testing

/// The file store against a real foliod: content in DATA/blobs, names in the log and the file index.
@Suite struct FileStoreTests {
    static func randomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    }

    static func sha256(_ bytes: [UInt8]) -> String {
        let hasher = SHA256Hasher()
        hasher.update(bytes)
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }

    static func put(
        _ connection: TestConnection, _ name: String?, _ content: [UInt8], type: String? = nil, replace: Bool? = nil
    ) throws -> JSON {
        var request: JSONObject = ["op": "file.put", "data": .string(Base64.encode(content))]
        if let name { request["name"] = .string(name) }
        if let type { request["contentType"] = .string(type) }
        if let replace { request["replace"] = .bool(replace) }
        return try connection.request(.object(request))
    }

    /// The whole content of `name`, read in pieces of at most 512 KiB; and how many pieces it took.
    static func readBack(_ connection: TestConnection, _ name: String) throws -> (bytes: [UInt8], pieces: Int) {
        var bytes: [UInt8] = []
        var pieces = 0
        while true {
            let piece = try connection.request([
                "op": "file.read", "name": .string(name), "offset": .int(Int64(bytes.count)),
            ])
            let result = try #require(piece.result, "\(piece)")
            let data = try Base64.decode(try #require(result["data"]?.stringValue).utf8, field: "data")
            #expect(result["length"] == .int(Int64(data.count)))
            #expect(data.count <= FileRead.maxLength)
            bytes += data
            pieces += 1
            let size = Int(try #require(result["size"]?.integerValue))
            if data.isEmpty || bytes.count >= size { return (bytes, pieces) }
        }
    }

    /// The blobs on disk (hex SHA-256), temporary files aside.
    static func blobs(_ daemon: RunningDaemon) -> [String] {
        BlobStore(directory: daemon.dataDirectory + "/blobs").storedBlobs().sorted()
    }

    static func temporaryFiles(_ daemon: RunningDaemon) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: daemon.dataDirectory + "/blobs/tmp")) ?? []
    }

    @Test func aFileLargerThanOneReadPieceComesBackByteForByte() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let content = Self.randomBytes(700_000, seed: 1)
            let put = try Self.put(connection, "photos/large.jpg", content, type: "image/jpeg")
            let result = try #require(put.result, "\(put)")
            #expect(result["name"] == "photos/large.jpg")
            #expect(result["size"] == 700_000)
            #expect(result["sha256"] == .string(Self.sha256(content)))
            #expect(result["contentType"] == "image/jpeg")
            #expect(result["createdAt"]?.stringValue != nil)

            let got = try #require(try connection.request(["op": "file.get", "name": "photos/large.jpg"]).result)
            #expect(
                got["sha256"] == result["sha256"] && got["size"] == 700_000 && got["uploader"] == .int(Int64(getuid())))
            let (bytes, pieces) = try Self.readBack(connection, "photos/large.jpg")
            #expect(pieces == 2)
            #expect(bytes == content)
            let path =
                daemon.dataDirectory + "/blobs/" + Self.sha256(content).prefix(2) + "/"
                + Self.sha256(content).dropFirst(2)
            #expect(FileManager.default.contents(atPath: path) == Data(content))

            let tail = try #require(
                try connection.request([
                    "op": "file.read", "name": "photos/large.jpg", "offset": 699_990, "length": 100,
                ]).result)
            #expect(tail["length"] == 10 && tail["offset"] == 699_990 && tail["size"] == 700_000)
            let tooLong = try connection.request([
                "op": "file.read", "name": "photos/large.jpg", "length": .int(Int64(FileRead.maxLength + 1)),
            ])
            #expect(tooLong.errorCode == "bad_request")
            #expect(try connection.request(["op": "file.read", "name": "nope"]).errorCode == "not_found")
        }
    }

    @Test func theSameContentUnderTwoNamesIsStoredOnce() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let content = Self.randomBytes(10_000, seed: 2)
            #expect(try Self.put(connection, "a.bin", content).isOK)
            let second = try Self.put(connection, nil, content)
            let generated = try #require(second.result?["name"]?.stringValue, "\(second)")
            #expect(generated.utf8.count == 26, "a generated name is made like an object id: \(generated)")
            #expect(Self.blobs(daemon) == [Self.sha256(content)])
            let files = try #require(try connection.request(["op": "stats"]).result?["files"])
            #expect(files == ["count": 2, "blobs": 1, "bytesStored": 10_000, "bytesSaved": 10_000, "orphans": 2])
            #expect(try Self.readBack(connection, generated).bytes == content)
        }
    }

    @Test func aBoundNameNeedsReplaceAndReplaceBindsTheNewContent() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            #expect(try Self.put(connection, "report.txt", Array("first".utf8)).isOK)
            let again = try Self.put(connection, "report.txt", Array("second".utf8))
            #expect(again.errorCode == "conflict", "\(again)")
            #expect(try Self.readBack(connection, "report.txt").bytes == Array("first".utf8))
            let replaced = try Self.put(
                connection, "report.txt", Array("second".utf8), type: "text/plain", replace: true)
            #expect(replaced.result?["sha256"] == .string(Self.sha256(Array("second".utf8))), "\(replaced)")
            #expect(try Self.readBack(connection, "report.txt").bytes == Array("second".utf8))
            let files = try #require(try connection.request(["op": "stats"]).result?["files"])
            #expect(files == ["count": 1, "blobs": 1, "bytesStored": 6, "bytesSaved": 0, "orphans": 1])
            // replace is allowed, not required: a new name may be put with it.
            #expect(try Self.put(connection, "fresh.txt", Array("x".utf8), replace: true).isOK)
        }
    }

    @Test func deleteRemovesTheNameAndTheLogRecordsBoth() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let watcher = try daemon.connect()
            #expect(try watcher.request(["op": "watch", "tag": "w"]).isOK)
            #expect(try Self.put(connection, "gone.txt", Array("bye".utf8)).isOK)
            let live = try #require(try watcher.readJSON())
            #expect(
                live["tag"] == "w" && live["event"]?["type"] == "file.put" && live["event"]?["name"] == "gone.txt",
                "\(live)")
            let deleted = try connection.request(["op": "file.delete", "name": "gone.txt"])
            #expect(deleted.result == ["name": "gone.txt", "deleted": true], "\(deleted)")
            #expect(try connection.request(["op": "file.get", "name": "gone.txt"]).errorCode == "not_found")
            #expect(try connection.request(["op": "file.delete", "name": "gone.txt"]).errorCode == "not_found")
            let events = try #require(try connection.request(["op": "events"]).result?["events"]?.arrayValue)
            #expect(events.map { $0["type"] } == ["file.put", "file.deleted"])
            #expect(events[0]["name"] == "gone.txt" && events[0]["size"] == 3 && events[0]["replace"] == false)
            #expect(events[0]["contentType"] == "application/octet-stream")
            #expect(events[1]["name"] == "gone.txt")
        }
    }

    @Test func listPagesByNameWithinAPrefix() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            for index in 0..<25 {
                #expect(try Self.put(connection, "a/\(String(format: "%02d", index))", [UInt8(index)]).isOK)
            }
            for index in 0..<5 { #expect(try Self.put(connection, "b/\(index)", [UInt8(index)]).isOK) }
            var names: [String] = []
            var request: JSONObject = ["op": "file.list", "prefix": "a/", "limit": 10]
            var pages = 0
            while true {
                let page = try #require(try connection.request(.object(request)).result)
                names += try #require(page["items"]?.arrayValue).compactMap { $0["name"]?.stringValue }
                pages += 1
                guard let next = page["next"]?.stringValue else { break }
                request["after"] = .string(next)
            }
            #expect(pages == 3)
            #expect(names == (0..<25).map { "a/\(String(format: "%02d", $0))" })
            let all = try #require(try connection.request(["op": "file.list", "limit": 1000]).result)
            #expect(all["items"]?.arrayValue?.count == 30 && all["next"] == .null)
        }
    }

    @Test func badNamesAndBadBase64AreBadRequests() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let badNames = ["", "/a", "a/", "a//b", "a/../b", "..", "x\u{0}y", String(repeating: "n", count: 257)]
            for name in badNames {
                let answer = try Self.put(connection, name, [1, 2, 3])
                #expect(answer.errorCode == "bad_request", "\(name.debugDescription): \(answer)")
                #expect(answer["error"]?["message"]?.stringValue?.contains("file name") == true, "\(answer)")
            }
            #expect(
                try Self.put(connection, String(repeating: "n", count: 256), [1]).isOK, "256 bytes is the longest name")
            #expect(try Self.put(connection, "a/b.c/d", [1]).isOK)

            let notBase64 = try connection.request(["op": "file.put", "name": "x", "data": "aGVs*G8="])
            #expect(notBase64["error"]?["message"] == "field \"data\": invalid base64 at offset 4", "\(notBase64)")
            let unpadded = try connection.request(["op": "file.put", "name": "x", "data": "aGVsbG8"])
            #expect(
                unpadded.errorCode == "bad_request"
                    && unpadded["error"]?["message"]?.stringValue?.contains("multiple of 4") == true)
            let early = try connection.request(["op": "file.put", "name": "x", "data": "aG==bG8="])
            #expect(early["error"]?["message"] == "field \"data\": invalid base64 at offset 2", "\(early)")
            #expect(try connection.request(["op": "file.put", "name": "x"]).errorCode == "bad_request")
            #expect(
                try connection.request(["op": "file.put", "name": "x", "data": "", "size": 1]).errorCode
                    == "bad_request")
            #expect(try connection.request(["op": "file.get", "name": "a/../b"]).errorCode == "bad_request")
            #expect(
                try connection.request(["op": "file.get", "name": "x"]).errorCode == "not_found",
                "nothing bad was bound")
            // An empty file is a file.
            #expect(try connection.request(["op": "file.put", "name": "empty", "data": ""]).result?["size"] == 0)
            #expect(try Self.readBack(connection, "empty").bytes == [])
        }
    }

    @Test func rebuildVerifyAndImportReproduceTheDigestWithFiles() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            #expect(try Self.put(connection, "one", Self.randomBytes(3000, seed: 3)).isOK)
            #expect(try Self.put(connection, "two", Self.randomBytes(3000, seed: 3)).isOK)
            #expect(try Self.put(connection, "three", Self.randomBytes(100, seed: 4)).isOK)
            #expect(try Self.put(connection, "one", Self.randomBytes(50, seed: 5), replace: true).isOK)
            #expect(try connection.request(["op": "file.delete", "name": "three"]).isOK)
            #expect(try connection.request(["op": "create", "collection": "Note", "data": ["file": "two"]]).isOK)
            let stats = try #require(try connection.request(["op": "stats"]).result)
            let digest = try #require(stats["digest"]?.stringValue)
            #expect(stats["files"] == ["count": 2, "blobs": 2, "bytesStored": 3050, "bytesSaved": 0, "orphans": 2])
            #expect(try connection.request(["op": "verify"]).result?["ok"] == true)

            let export = try CommandRun.run(
                Binaries.folio, ["export"], environment: ["FOLIO_SOCKET": daemon.socketPath])
            #expect(export.status == 0, "\(export)")
            let exportFile = daemon.directory + "/events.jsonl"
            try export.stdout.write(toFile: exportFile, atomically: true, encoding: .utf8)
            connection.close()
            #expect(try daemon.stop() == 0)

            let verify = try CommandRun.run(Binaries.foliod, ["verify", "--data", daemon.dataDirectory])
            #expect(verify.status == 0 && verify.stdout.contains(digest), "\(verify)")
            let rebuild = try CommandRun.run(Binaries.foliod, ["rebuild", "--data", daemon.dataDirectory])
            #expect(rebuild.status == 0 && rebuild.stdout.contains(digest), "\(rebuild)")
            let imported = try CommandRun.run(
                Binaries.foliod, ["import", "--data", daemon.directory + "/imported", exportFile])
            #expect(imported.status == 0 && imported.stdout.contains(digest), "\(imported)")

            try daemon.start()
            let after = try daemon.connect()
            #expect(try after.request(["op": "stats"]).result?["digest"] == .string(digest))
            #expect(try Self.readBack(after, "two").bytes == Self.randomBytes(3000, seed: 3))
        }
    }

    /// The writer dies before the commit of the put's event: the content was already on disk, and
    /// no name was bound. The blob, named by no one, is swept once its grace is over.
    @Test func theBlobIsOnDiskBeforeItsEventCommits() throws {
        try withTemporaryDirectory { directory in
            let daemon = RunningDaemon(directory: directory, arguments: ["--file-grace", "1"])
            defer { daemon.shutDown() }
            daemon.environment = ["FOLIO_FAILPOINTS": "writer.beforeCommit=crash"]
            try daemon.start()
            let content = Self.randomBytes(5000, seed: 6)
            let connection = try daemon.connect()
            try connection.send(["op": "file.put", "name": "crash.bin", "data": .string(Base64.encode(content))])
            #expect(daemon.waitForExit(timeout: 30) == 86, "\(daemon.log)")
            #expect(Self.blobs(daemon) == [Self.sha256(content)])
            daemon.environment = [:]
            try daemon.start()
            #expect(try daemon.request(["op": "file.get", "name": "crash.bin"]).errorCode == "not_found")
            let deadline = Date().addingTimeInterval(20)
            while !Self.blobs(daemon).isEmpty && Date() < deadline { usleep(100_000) }
            #expect(Self.blobs(daemon).isEmpty, "the unnamed blob is swept")
        }
    }

    @Test func temporaryFilesOfAnInterruptedPutAreRemovedAtStart() throws {
        try withTemporaryDirectory { directory in
            let daemon = RunningDaemon(directory: directory)
            defer { daemon.shutDown() }
            daemon.environment = ["FOLIO_FAILPOINTS": "blob.beforeRename=crash"]
            try daemon.start()
            let connection = try daemon.connect()
            try connection.send([
                "op": "file.put", "name": "half.bin", "data": .string(Base64.encode(Self.randomBytes(4000, seed: 7))),
            ])
            #expect(daemon.waitForExit(timeout: 30) == 86, "\(daemon.log)")
            #expect(Self.temporaryFiles(daemon).count == 1)
            #expect(Self.blobs(daemon).isEmpty, "nothing was renamed into place")
            daemon.environment = [:]
            try daemon.start()
            #expect(Self.temporaryFiles(daemon).isEmpty)
            #expect(daemon.log.contains("removed 1 temporary file(s)"))
            #expect(try daemon.request(["op": "file.get", "name": "half.bin"]).errorCode == "not_found")
        }
    }

    @Test func unreferencedContentIsReclaimedAfterTheGracePeriod() throws {
        try withRunningDaemon(arguments: ["--file-grace", "1"]) { daemon in
            let connection = try daemon.connect()
            let kept = Self.randomBytes(2000, seed: 8)
            let dropped = Self.randomBytes(2000, seed: 9)
            #expect(try Self.put(connection, "kept", kept).isOK)
            #expect(try Self.put(connection, "dropped", dropped).isOK)
            #expect(try Self.put(connection, "replaced", dropped).isOK)
            #expect(try connection.request(["op": "file.delete", "name": "dropped"]).isOK)
            #expect(try Self.put(connection, "replaced", kept, replace: true).isOK)
            #expect(Self.blobs(daemon).count == 2, "not before its grace")
            let deadline = Date().addingTimeInterval(20)
            while Self.blobs(daemon).count > 1 && Date() < deadline { usleep(100_000) }
            #expect(Self.blobs(daemon) == [Self.sha256(kept)])
            usleep(1_500_000)
            #expect(Self.blobs(daemon) == [Self.sha256(kept)], "content a name refers to stays")
            #expect(try Self.readBack(connection, "kept").bytes == kept)
            // Put again, the content is stored again.
            #expect(try Self.put(connection, "back", dropped).isOK)
            #expect(try Self.readBack(connection, "back").bytes == dropped)
        }
    }

    /// A device out of space while the content is written: `unavailable`, no blob, no temporary
    /// file, no name; the same put succeeds once there is room.
    @Test func aFullDiskWhileStoringTheContentIsUnavailableAndLeavesNothing() throws {
        try withShimmedDaemon { daemon, shim in
            let connection = try daemon.connect()
            let content = Self.randomBytes(100_000, seed: 11)
            try shim.set(
                .init(calls: "write", nth: 1, error: "ENOSPC", sticky: true, path: daemon.dataDirectory + "/blobs"))
            let refused = try Self.put(connection, "full.bin", content)
            #expect(refused.errorCode == "unavailable", "\(refused)")
            #expect(refused["error"]?["message"]?.stringValue?.contains("storage is full") == true, "\(refused)")
            #expect(!shim.injected.isEmpty)
            #expect(Self.blobs(daemon).isEmpty && Self.temporaryFiles(daemon).isEmpty)
            #expect(try connection.request(["op": "file.get", "name": "full.bin"]).errorCode == "not_found")
            try shim.clear()
            #expect(try Self.put(connection, "full.bin", content).isOK)
            #expect(try Self.readBack(connection, "full.bin").bytes == content)
        }
    }

    /// The NCMB daily-report app: a photo saved under a UUID name, the name in the report; list
    /// the reports, read the photo back. Through the real CLI.
    @Test func dailyReportFlowThroughTheCLI() throws {
        try withRunningDaemon { daemon in
            let environment = ["FOLIO_SOCKET": daemon.socketPath]
            let photo = Self.randomBytes(300_000, seed: 10)
            let photoPath = daemon.directory + "/photo.jpg"
            try Data(photo).write(to: URL(fileURLWithPath: photoPath))
            let name = UUID().uuidString.lowercased() + ".jpg"
            let put = try CommandRun.run(
                Binaries.folio, ["file", "put", photoPath, "--name", name, "--type", "image/jpeg"],
                environment: environment)
            #expect(put.status == 0, "\(put)")
            #expect(put.stdout.contains(Self.sha256(photo)), "\(put)")
            let create = try CommandRun.run(
                Binaries.folio,
                [
                    "create", "Report", "date:={\"$date\":\"2026-12-01T09:00:00+09:00\"}", "title=Site visit",
                    "photo=\(name)",
                ],
                environment: environment)
            #expect(create.status == 0, "\(create)")

            let list = try CommandRun.run(Binaries.folio, ["list", "Report"], environment: environment)
            #expect(list.status == 0, "\(list)")
            let page = try JSONParser.parse(try #require(list.jsonLines.first))
            let report = try #require(page["items"]?.arrayValue?.first)
            #expect(report["date"] == ["$date": "2026-12-01T09:00:00+09:00"])
            let photoName = try #require(report["photo"]?.stringValue)

            let ls = try CommandRun.run(Binaries.folio, ["file", "ls"], environment: environment)
            #expect(ls.status == 0 && ls.jsonLines.count == 1 && ls.stdout.contains("image/jpeg"), "\(ls)")
            let copy = daemon.directory + "/copy.jpg"
            let get = try CommandRun.run(
                "/bin/sh", ["-c", "\"$0\" file get \"$1\" > \"$2\"", Binaries.folio, photoName, copy],
                environment: environment)
            #expect(get.status == 0, "\(get)")
            #expect(FileManager.default.contents(atPath: copy) == Data(photo))

            let rm = try CommandRun.run(Binaries.folio, ["file", "rm", photoName], environment: environment)
            #expect(rm.status == 0, "\(rm)")
            let missing = try CommandRun.run(Binaries.folio, ["file", "get", photoName], environment: environment)
            #expect(missing.status == 1 && missing.stderr.contains("not_found"), "\(missing)")
        }
    }
}
