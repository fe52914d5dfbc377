import FolioHarness
import FolioJSON
import Foundation
import Testing

@Suite struct AuditIntegrationTests {
    private func digest(_ daemon: RunningDaemon) throws -> String {
        try #require(try daemon.request(["op": "stats"]).result?["digest"]?.stringValue)
    }

    private func populate(_ daemon: RunningDaemon, count: Int) throws {
        _ = try daemon.request(["op": "view.define", "name": "byN", "collection": "Task", "sort": ["-n", "title"]])
        let connection = try daemon.connect()
        for index in 0..<count {
            let response = try connection.request([
                "op": "create", "collection": "Task", "id": .string("t\(index)"),
                "data": ["n": .int(Int64(index % 13)), "title": .string("task \(index)")],
            ])
            guard response.isOK else { throw DaemonError("create failed: \(response)") }
            if index % 3 == 0 {
                _ = try connection.request([
                    "op": "update", "collection": "Task", "id": .string("t\(index)"), "patch": ["done": true],
                ])
            }
            if index % 7 == 0 {
                _ = try connection.request(["op": "delete", "collection": "Task", "id": .string("t\(index)")])
            }
        }
    }

    @Test func exportThenImportGivesTheSameDigestAndVerifyPasses() throws {
        try withRunningDaemon { daemon in
            try populate(daemon, count: 300)
            let original = try digest(daemon)
            let verify = try CommandRun.run(
                Binaries.folio, ["verify"], environment: ["FOLIO_SOCKET": daemon.socketPath])
            #expect(verify.status == 0, "\(verify)")
            #expect(verify.stdout.contains(original))

            let exportFile = daemon.directory + "/events.jsonl"
            let export = try CommandRun.run(
                Binaries.folio, ["export"], environment: ["FOLIO_SOCKET": daemon.socketPath])
            #expect(export.status == 0, "\(export)")
            try export.stdout.write(toFile: exportFile, atomically: true, encoding: .utf8)
            let imported = daemon.directory + "/imported"
            let run = try CommandRun.run(Binaries.foliod, ["import", "--data", imported, exportFile])
            #expect(run.status == 0, "\(run)")
            #expect(run.stdout.contains(original), "import prints the digest of the original")

            let copy = RunningDaemon(directory: daemon.directory + "/second", arguments: ["--data", imported])
            try FileManager.default.createDirectory(atPath: copy.directory, withIntermediateDirectories: true)
            defer { copy.shutDown() }
            try copy.start()
            #expect(try digest(copy) == original)
        }
    }

    /// Pages of `events` end at 8 MiB, long before 1000 large events: export follows `next` to the
    /// end of the log, and the import of it is whole.
    @Test func exportOfLargeEventsFollowsThePagesToTheEnd() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let text = String(repeating: "y", count: 900_000)
            for index in 0..<12 {
                #expect(
                    try connection.request([
                        "op": "create", "collection": "Photo", "id": .string("p\(index)"),
                        "data": ["jpeg": .string(text)],
                    ]).isOK)
            }
            let original = try digest(daemon)
            // 11 MB of events each way: under AddressSanitizer, beside every other suite on two
            // cores, the import took over 30 s once (CI, 2026-12-04); the timeouts only guard hangs.
            let export = try CommandRun.run(
                Binaries.folio, ["export"], environment: ["FOLIO_SOCKET": daemon.socketPath], timeout: 120)
            #expect(
                export.status == 0 && export.jsonLines.count == 13, "\(export.stderr) \(export.jsonLines.count) lines")
            #expect(export.jsonLines.last?.contains(#""lastSeq":12"#) == true)
            let exportFile = daemon.directory + "/events.jsonl"
            try export.stdout.write(toFile: exportFile, atomically: true, encoding: .utf8)
            let run = try CommandRun.run(
                Binaries.foliod, ["import", "--data", daemon.directory + "/imported", exportFile], timeout: 120)
            #expect(run.status == 0 && run.stdout.contains(original), "\(run)")
        }
    }

    /// `folio export` copies each event's bytes out of the page rather than parsing and writing
    /// them again: strings that hold quotes, backslashes (runs of them, before a quote too), commas,
    /// brackets and non-ASCII come out as foliod wrote them, over several pages.
    @Test func exportCopiesEachEventAsFoliodWroteIt() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let tricky = [#"a"b"#, #"c\d"#, #"e\\"#, #"\\\"f"#, "g,h]}{[", "é😀\u{1}\n", #"\"#, ""]
            for index in 0..<2500 {
                let text = tricky[index % tricky.count] + String(index)
                #expect(
                    try connection.request([
                        "op": "create", "collection": "T", "id": .string("t\(index)"),
                        "data": ["s": .string(text), "n": .int(Int64(index))],
                    ]).isOK)
            }
            var expected: [String] = []
            var after: Int64 = 0
            while true {
                let page = try connection.request(["op": "events", "after": .int(after), "limit": 1000])
                guard case .array(let events)? = page.result?["events"], let next = page.result?["next"]?.integerValue,
                    !events.isEmpty
                else { break }
                expected += events.map { String(decoding: $0.serialized(), as: UTF8.self) }
                after = next
            }
            #expect(expected.count == 2500)
            let export = try CommandRun.run(
                Binaries.folio, ["export"], environment: ["FOLIO_SOCKET": daemon.socketPath])
            #expect(export.status == 0, "\(export.stderr)")
            let lines = export.stdout.split(separator: "\n").map(String.init)
            #expect(lines.count == 2501)
            #expect(Array(lines.dropLast()) == expected)
            #expect(lines.last?.contains(#""lastSeq":2500"#) == true)
            let exportFile = daemon.directory + "/events.jsonl"
            try export.stdout.write(toFile: exportFile, atomically: true, encoding: .utf8)
            let run = try CommandRun.run(
                Binaries.foliod, ["import", "--data", daemon.directory + "/imported", exportFile])
            let original = try digest(daemon)
            #expect(run.status == 0 && run.stdout.contains(original), "\(run)")
        }
    }

    @Test func offlineVerifyAndRebuildReportTheDigest() throws {
        try withRunningDaemon { daemon in
            try populate(daemon, count: 120)
            let original = try digest(daemon)
            #expect(try daemon.stop() == 0)
            let refused = try CommandRun.run(Binaries.foliod, ["verify", "--data", daemon.dataDirectory + "-missing"])
            #expect(refused.status != 0)
            let verify = try CommandRun.run(Binaries.foliod, ["verify", "--data", daemon.dataDirectory])
            #expect(verify.status == 0, "\(verify)")
            #expect(verify.stdout.contains(original))
            let rebuild = try CommandRun.run(Binaries.foliod, ["rebuild", "--data", daemon.dataDirectory])
            #expect(rebuild.status == 0, "\(rebuild)")
            #expect(rebuild.stdout.contains(original))
            try daemon.start()
            #expect(try digest(daemon) == original)
            let busy = try CommandRun.run(Binaries.foliod, ["rebuild", "--data", daemon.dataDirectory])
            #expect(
                busy.status != 0 && busy.stderr.contains("data directory"),
                "offline commands refuse to run beside the daemon: \(busy)")
        }
    }

    @Test func aBackupTakenDuringWritesStartsWithTheDigestTheSourceHadAtThatSequence() throws {
        try withRunningDaemon { daemon in
            try populate(daemon, count: 50)
            let socket = daemon.socketPath
            let writing = runOnThreadsInBackground(3) { worker in
                let connection = try TestConnection(path: socket)
                for index in 0..<200 {
                    let response = try connection.request([
                        "op": "create", "collection": "Task",
                        "data": ["n": .int(Int64(index)), "title": .string("w\(worker)")],
                    ])
                    guard response.isOK else { throw DaemonError("write failed: \(response)") }
                }
            }
            usleep(100_000)
            let backupDirectory = daemon.directory + "/backup"
            let backup = try CommandRun.run(
                Binaries.folio, ["backup", backupDirectory], environment: ["FOLIO_SOCKET": socket])
            #expect(backup.status == 0, "\(backup)")
            #expect(writing.wait().isEmpty)
            let summary = try JSONParser.parse(backup.stdout)
            let sequence = try #require(summary["lastSeq"]?.integerValue)
            let backupDigest = try #require(summary["digest"]?.stringValue)

            // The source's state at that sequence: its log up to there, imported into a new store.
            var lines = ""
            var chainHead = ""
            var after: Int64 = 0
            while after < sequence {
                let page = try daemon.request(["op": "events", "after": .int(after), "limit": 1000])
                for event in try #require(page.result?["events"]?.arrayValue)
                where try #require(event["seq"]?.integerValue) <= sequence {
                    lines += String(decoding: event.serialized(), as: UTF8.self) + "\n"
                    after = event["seq"]!.integerValue!
                    chainHead = event["hash"]!.stringValue!
                }
            }
            lines += #"{"end":true,"lastSeq":\#(sequence),"chainHead":"\#(chainHead)"}"# + "\n"
            try lines.write(toFile: daemon.directory + "/prefix.jsonl", atomically: true, encoding: .utf8)
            let imported = try CommandRun.run(
                Binaries.foliod, ["import", "--data", daemon.directory + "/prefix", daemon.directory + "/prefix.jsonl"])
            #expect(imported.status == 0, "\(imported)")
            #expect(
                imported.stdout.contains(backupDigest), "the backup holds the source's state at sequence \(sequence)")

            let restored = RunningDaemon(
                directory: daemon.directory + "/restored", arguments: ["--data", backupDirectory])
            try FileManager.default.createDirectory(atPath: restored.directory, withIntermediateDirectories: true)
            defer { restored.shutDown() }
            try restored.start()
            #expect(try digest(restored) == backupDigest)
            #expect(try restored.request(["op": "verify"]).result?["ok"] == true)
        }
    }

    @Test func theMapGrowsWhenItFills() throws {
        try withRunningDaemon(arguments: ["--map-size", "1048576"]) { daemon in
            let connection = try daemon.connect()
            let payload = String(repeating: "y", count: 1000)
            for index in 0..<3000 {
                try connection.send([
                    "op": "create", "collection": "Blob", "id": .string("b\(index)"), "data": ["p": .string(payload)],
                ])
            }
            for _ in 0..<3000 {
                let response = try connection.readResponse()
                #expect(response.isOK, "\(response)")
            }
            let stats = try daemon.request(["op": "stats"])
            #expect(try #require(stats.result?["lmdb"]?["mapSize"]?.integerValue) > 1_048_576)
            #expect(stats.result?["collections"]?["Blob"] == 3000)
            #expect(try daemon.stop() == 0)
            try daemon.start()
            #expect(try daemon.request(["op": "get", "collection": "Blob", "id": "b2999"]).isOK)

            // Verify, rebuild and import start in a map of 1 MiB too, and grow theirs as the daemon
            // does (`make bench-replay`'s verify of 1,350,000 events filled its scratch store's).
            let original = try digest(daemon)
            let verify = try CommandRun.run(
                Binaries.folio, ["verify"], environment: ["FOLIO_SOCKET": daemon.socketPath])
            #expect(verify.status == 0 && verify.stdout.contains(original), "\(verify)")
            let exportFile = daemon.directory + "/events.jsonl"
            let export = try CommandRun.run(
                Binaries.folio, ["export"], environment: ["FOLIO_SOCKET": daemon.socketPath])
            #expect(export.status == 0, "\(export)")
            try export.stdout.write(toFile: exportFile, atomically: true, encoding: .utf8)
            #expect(try daemon.stop() == 0)
            for command in ["verify", "rebuild"] {
                let run = try CommandRun.run(
                    Binaries.foliod, [command, "--data", daemon.dataDirectory, "--map-size", "1048576"])
                #expect(run.status == 0 && run.stdout.contains(original), "\(run)")
            }
            let imported = try CommandRun.run(
                Binaries.foliod,
                ["import", "--data", daemon.directory + "/imported", "--map-size", "1048576", exportFile])
            #expect(imported.status == 0 && imported.stdout.contains(original), "\(imported)")
        }
    }
}
