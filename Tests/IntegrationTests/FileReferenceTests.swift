import FolioHarness
import FolioJSON
import FolioProtocol
import Foundation
import Testing

/// Records that refer to files by `{"$file"}`, against a real foliod over its socket and the CLI.
@Suite struct FileReferenceTests {
    static func put(_ connection: TestConnection, _ name: String, _ content: [UInt8] = Array("photo".utf8)) throws {
        let put = try FileStoreTests.put(connection, name, content, type: "image/jpeg")
        #expect(put.isOK, "\(put)")
    }

    @Test func referrersIncludeAndDeletesOfReferredFiles() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            try Self.put(connection, "photos/a.jpg")
            let created = try connection.request([
                "op": "create", "collection": "Report", "id": "r1", "data": ["photo": ["$file": "photos/a.jpg"]],
            ])
            #expect(created.isOK, "\(created)")

            let got = try #require(
                try connection.request(["op": "file.get", "name": "photos/a.jpg", "referrers": true]).result)
            #expect(
                got["referrers"] == [["ref": "Report/r1", "field": "photo"]] && got["referrerCount"] == 1, "\(got)")
            #expect(got["sha256"]?.stringValue != nil && got["size"] == 5)
            let plain = try #require(try connection.request(["op": "file.get", "name": "photos/a.jpg"]).result)
            #expect(plain["referrers"] == nil)
            #expect(
                try connection.request(["op": "file.get", "name": "photos/a.jpg", "limit": 3]).errorCode
                    == "bad_request")

            let included = try #require(
                try connection.request(["op": "get", "collection": "Report", "id": "r1", "include": ["photo"]]).result)
            #expect(included["photo"]?["name"] == "photos/a.jpg" && included["photo"]?["size"] == 5, "\(included)")
            #expect(
                included["photo"]?["contentType"] == "image/jpeg"
                    && included["photo"]?["createdAt"] == plain["createdAt"])
            #expect(included["photo"]?["sha256"] == plain["sha256"] && included["photo"]?["uploader"] == nil)

            let refused = try connection.request(["op": "file.delete", "name": "photos/a.jpg"])
            #expect(refused.errorCode == "conflict", "\(refused)")
            #expect(refused.errorMessage?.contains("Report/r1 (photo)") == true, "\(refused)")
            #expect(
                refused["error"]?["referrers"] == [["ref": "Report/r1", "field": "photo"]]
                    && refused["error"]?["referrerCount"] == 1, "\(refused)")
            #expect(
                try connection.request(["op": "file.delete", "name": "photos/a.jpg", "ifUnreferenced": true]).errorCode
                    == "conflict")
            #expect(
                try connection.request(["op": "file.delete", "name": "photos/a.jpg", "ifUnreferenced": false]).errorCode
                    == "bad_request")
            #expect(
                try connection.request([
                    "op": "file.delete", "name": "photos/a.jpg", "ifUnreferenced": true, "force": true,
                ]).errorCode == "bad_request")
            #expect(try connection.request(["op": "stats"]).result?["files"]?["orphans"] == 0)

            // Once the record no longer refers to it, the file goes.
            #expect(
                try connection.request(["op": "update", "collection": "Report", "id": "r1", "patch": ["photo": .null]])
                    .isOK)
            #expect(try connection.request(["op": "stats"]).result?["files"]?["orphans"] == 1)
            #expect(try connection.request(["op": "file.delete", "name": "photos/a.jpg", "ifUnreferenced": true]).isOK)

            // force deletes a file records refer to; their references dangle, and include says so.
            try Self.put(connection, "photos/b.jpg")
            #expect(
                try connection.request([
                    "op": "update", "collection": "Report", "id": "r1", "patch": ["photo": ["$file": "photos/b.jpg"]],
                ]).isOK)
            #expect(try connection.request(["op": "file.delete", "name": "photos/b.jpg", "force": true]).isOK)
            let dangling = try #require(
                try connection.request(["op": "get", "collection": "Report", "id": "r1", "include": ["photo"]]).result)
            #expect(dangling["photo"] == ["$file": "photos/b.jpg", "$missing": true], "\(dangling)")
            #expect(try connection.request(["op": "stats"]).result?["files"]?["orphans"] == 0)

            let bad = try connection.request([
                "op": "create", "collection": "Report", "data": ["photo": ["$file": "a//b"]],
            ])
            #expect(
                bad.errorCode == "bad_request" && bad.errorMessage?.contains("photo") == true
                    && bad.errorMessage?.contains("$file") == true, "\(bad)")
            #expect(
                try connection.request(["op": "create", "collection": "Report", "data": ["photo": ["$file": 7]]])
                    .errorCode == "bad_request")
        }
    }

    @Test func orphansByAgeAndPruneThroughTheCLI() throws {
        try withRunningDaemon { daemon in
            let environment = ["FOLIO_SOCKET": daemon.socketPath]
            let connection = try daemon.connect()
            try Self.put(connection, "old/unused.jpg")
            try Self.put(connection, "old/used.jpg")
            #expect(
                try connection.request([
                    "op": "create", "collection": "Report", "data": ["photos": [["$file": "old/used.jpg"]]],
                ]).isOK)
            Thread.sleep(forTimeInterval: 1.5)
            try Self.put(connection, "new.jpg")

            let aged = try #require(try connection.request(["op": "file.orphans", "olderThan": 1]).result)
            #expect(
                aged["items"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["old/unused.jpg"]
                    && aged["next"] == .null, "\(aged)")
            let all = try #require(try connection.request(["op": "file.orphans"]).result)
            #expect(
                all["items"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["new.jpg", "old/unused.jpg"],
                "\(all)")
            let paged = try #require(try connection.request(["op": "file.orphans", "limit": 1]).result)
            #expect(paged["next"] == "new.jpg", "\(paged)")
            #expect(try connection.request(["op": "stats"]).result?["files"]?["orphans"] == 2)
            #expect(try connection.request(["op": "file.orphans", "olderThan": -1]).errorCode == "bad_request")

            let listed = try CommandRun.run(
                Binaries.folio, ["file", "orphans", "--older-than", "1s"], environment: environment)
            #expect(
                listed.status == 0 && listed.jsonLines.count == 1 && listed.stdout.contains("old/unused.jpg"),
                "\(listed)")
            let badAge = try CommandRun.run(
                Binaries.folio, ["file", "prune", "--older-than", "soon"], environment: environment)
            #expect(badAge.status == 64, "\(badAge)")
            let pruned = try CommandRun.run(
                Binaries.folio, ["file", "prune", "--older-than", "1s"], environment: environment)
            #expect(pruned.status == 0 && pruned.jsonLines.count == 1, "\(pruned)")
            #expect(
                try JSONParser.parse(try #require(pruned.jsonLines.first)) == [
                    "name": "old/unused.jpg", "deleted": true,
                ], "\(pruned)")
            let names = try #require(try connection.request(["op": "file.list"]).result?["items"]?.arrayValue)
                .compactMap { $0["name"]?.stringValue }
            #expect(names == ["new.jpg", "old/used.jpg"])
            #expect(try connection.request(["op": "stats"]).result?["files"]?["orphans"] == 1)

            let info = try CommandRun.run(Binaries.folio, ["file", "info", "old/used.jpg"], environment: environment)
            #expect(
                info.status == 0 && info.stdout.contains("referrerCount") && info.stdout.contains("photos"), "\(info)")
            let rm = try CommandRun.run(Binaries.folio, ["file", "rm", "old/used.jpg"], environment: environment)
            #expect(rm.status == 1 && rm.stderr.contains("conflict"), "\(rm)")
            let forced = try CommandRun.run(
                Binaries.folio, ["file", "rm", "old/used.jpg", "--force"], environment: environment)
            #expect(forced.status == 0, "\(forced)")
        }
    }

    /// The NCMB daily report: the photo put first, then the report with its date and the photo's
    /// name; list the reports with the photo's metadata included, and read the photo back.
    @Test func dailyReportWithAPhotoFile() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let photo = FileStoreTests.randomBytes(600_000, seed: 21)
            let name = "reports/" + UUID().uuidString.lowercased() + ".jpg"
            try Self.put(connection, name, photo)
            let report: JSON = [
                "date": ["$date": "2026-12-01T09:00:00+09:00"], "title": "Site visit",
                "photo": ["$file": .string(name)],
            ]
            #expect(try connection.request(["op": "create", "collection": "Report", "data": report]).isOK)

            let page = try #require(
                try connection.request(["op": "list", "collection": "Report", "include": ["photo"]]).result)
            let item = try #require(page["items"]?.arrayValue?.first)
            #expect(item["date"] == ["$date": "2026-12-01T09:00:00+09:00"] && item["title"] == "Site visit")
            #expect(item["photo"]?["name"] == .string(name) && item["photo"]?["size"] == 600_000, "\(item)")
            #expect(
                item["photo"]?["sha256"] == .string(FileStoreTests.sha256(photo))
                    && item["photo"]?["contentType"] == "image/jpeg")
            let photoName = try #require(item["photo"]?["name"]?.stringValue)
            #expect(try FileStoreTests.readBack(connection, photoName).bytes == photo)
        }
    }

    /// Rebuild and verify cover the file references: the digest and the orphan count survive both.
    @Test func rebuildAndVerifyKeepReferencesAndOrphans() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            try Self.put(connection, "kept.jpg")
            try Self.put(connection, "orphan.jpg")
            #expect(
                try connection.request([
                    "op": "create", "collection": "Report", "id": "r1", "data": ["photo": ["$file": "kept.jpg"]],
                ]).isOK)
            let stats = try #require(try connection.request(["op": "stats"]).result)
            let digest = try #require(stats["digest"]?.stringValue)
            #expect(try connection.request(["op": "verify"]).result?["ok"] == true)
            connection.close()
            #expect(try daemon.stop() == 0)
            let rebuild = try CommandRun.run(Binaries.foliod, ["rebuild", "--data", daemon.dataDirectory])
            #expect(rebuild.status == 0 && rebuild.stdout.contains(digest), "\(rebuild)")
            try daemon.start()
            let after = try daemon.connect()
            #expect(try after.request(["op": "stats"]).result?["files"] == stats["files"])
            #expect(
                try after.request(["op": "file.get", "name": "kept.jpg", "referrers": true]).result?["referrerCount"]
                    == 1)
            #expect(try after.request(["op": "file.delete", "name": "kept.jpg"]).errorCode == "conflict")
        }
    }
}
