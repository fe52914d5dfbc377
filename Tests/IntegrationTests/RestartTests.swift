import FolioHarness
import FolioJSON
import Foundation
import Testing

/// What survives a restart: everything on SIGTERM, every acknowledged write on kill -9.
@Suite struct RestartTests {
    @Test func restartKeepsAllDataAndTheLogContinues() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            var expected: [String: JSON] = [:]
            for index in 0..<60 {
                let id = "r\(index)"
                let created = try connection.request([
                    "op": "create", "collection": "Doc", "id": .string(id), "data": ["n": .int(Int64(index))],
                ])
                let object: JSON = try #require(created.result, "\(created)")
                expected[id] = object
            }
            for index in stride(from: 0, to: 60, by: 3) {
                let id = "r\(index)"
                let updated = try connection.request([
                    "op": "update", "collection": "Doc", "id": .string(id), "patch": ["touched": true],
                ])
                let object: JSON = try #require(updated.result, "\(updated)")
                expected[id] = object
            }
            _ = try #require(try connection.request(["op": "delete", "collection": "Doc", "id": "r1"]).result)
            expected["r1"] = nil
            let before = try #require(try connection.request(["op": "stats"]).result)
            #expect(before["lastSeq"] == 81)
            connection.close()

            try daemon.restart()

            let reopened = try daemon.connect()
            for (id, object) in expected {
                let fetched = try reopened.request(["op": "get", "collection": "Doc", "id": .string(id)])
                #expect(fetched.result == object, "\(id) after restart: \(fetched)")
            }
            #expect(try reopened.request(["op": "get", "collection": "Doc", "id": "r1"]).errorCode == "not_found")
            let after = try #require(try reopened.request(["op": "stats"]).result)
            #expect(after["lastSeq"] == before["lastSeq"])
            #expect(after["chainHead"] == before["chainHead"])
            #expect(after["objects"] == 59)
            #expect(try reopened.request(["op": "hello"]).result?["lastSeq"] == 81)

            let next = try reopened.request(["op": "create", "collection": "Doc", "id": "after", "data": ["n": -1]])
            #expect(next.version == 1)
            let events = try reopened.request(["op": "events", "after": 80])
            let sequences = events.result?["events"]?.arrayValue?.map { $0["seq"] }
            #expect(sequences == [81, 82], "the log continues with the next sequence: \(events)")
            #expect(events.result?["events"]?.arrayValue?.last?["id"] == "after")
            #expect(events.result?["lastSeq"] == 82)
        }
    }

    /// 8 clients create and update their own objects; foliod is killed with SIGKILL in the middle.
    /// After a restart every acknowledged write is there: each object at least at its acknowledged
    /// version, and exactly at it when no later write to it was sent. The README promises this in
    /// every durability mode (they differ only for OS crashes): full with the journal (its default),
    /// where the restart resumes at LMDB's last commit, or, started as on another boot, applies the
    /// journal's records past the last checkpoint; and without the journal.
    @Test(arguments: ["full", "full, another boot", "full --journal off", "relaxed", "none"])
    func killNineLosesNoAcknowledgedWrite(durability: String) throws {
        let anotherBoot = durability.hasSuffix(", another boot")
        let mode = anotherBoot ? String(durability.dropLast(", another boot".count)) : durability
        try withRunningDaemon(arguments: ["--durability"] + mode.split(separator: " ").map(String.init)) { daemon in
            struct Ledger {
                var acknowledged: [String: Int64] = [:]
                /// Ids with a write sent and not answered.
                var inFlight: Set<String> = []
                var acknowledgements = 0
                var problems: [String] = []
            }
            let ledger = Locked(Ledger())
            let socket = daemon.socketPath
            let clients = 8
            let loadErrors = Locked<[(index: Int, error: any Error)]>([])
            let loadFinished = Locked(false)
            let connected = Locked(0)
            Thread {
                let errors = runOnThreads(clients) { client in
                    let connection = try TestConnection(path: socket)
                    connected.withLock { $0 += 1 }
                    for object in 0... {
                        let id = "k\(client)-\(object)"
                        for version in Int64(1)...3 {
                            let request: JSON =
                                version == 1
                                ? [
                                    "op": "create", "collection": "Load", "id": .string(id),
                                    "data": ["step": 1, "client": .int(Int64(client))],
                                ]
                                : [
                                    "op": "update", "collection": "Load", "id": .string(id),
                                    "patch": ["step": .int(version)], "ifVersion": .int(version - 1),
                                ]
                            ledger.withLock { _ = $0.inFlight.insert(id) }
                            // Once foliod is killed, sends fail or the stream ends: this client is done.
                            guard (try? connection.send(request)) != nil, let response = try? connection.readJSON()
                            else { return }
                            ledger.withLock { ledger in
                                if response.version == version {
                                    ledger.acknowledged[id] = version
                                    ledger.inFlight.remove(id)
                                    ledger.acknowledgements += 1
                                } else {
                                    ledger.problems.append("\(id) v\(version): \(response)")
                                }
                            }
                        }
                    }
                }
                loadErrors.withLock { $0 = errors }
                loadFinished.withLock { $0 = true }
            }.start()

            // Kill once every client is connected and the load is well under way (or after a minute,
            // and the checks below fail).
            let loadDeadline = Date().addingTimeInterval(60)
            while (connected.current < clients || ledger.withLock({ $0.acknowledgements }) < 400)
                && !loadFinished.current
                && Date() < loadDeadline
            {
                usleep(1_000)
            }
            daemon.killHard()
            let killedAt = ledger.withLock { $0.acknowledgements }
            let finishDeadline = Date().addingTimeInterval(60)
            while !loadFinished.current && Date() < finishDeadline { usleep(2_000) }
            #expect(loadFinished.current, "clients did not notice foliod died")
            #expect(loadErrors.current.isEmpty, "\(loadErrors.current)")

            let final = ledger.current
            #expect(final.problems.isEmpty, "\(final.problems.prefix(5))")
            #expect(killedAt >= 400, "the load ran (\(killedAt) acknowledged writes before the kill)")
            #expect(FileManager.default.fileExists(atPath: daemon.socketPath), "kill -9 leaves the socket file")

            if anotherBoot { daemon.environment["FOLIO_BOOT_ID"] = "another-boot" }
            try daemon.start()
            if anotherBoot { #expect(daemon.log.contains("recovered from the checkpoint"), "\(daemon.log)") }
            let connection = try daemon.connect()
            var lost: [String] = []
            for (id, version) in final.acknowledged.sorted(by: { $0.key < $1.key }) {
                let fetched = try connection.request(["op": "get", "collection": "Load", "id": .string(id)])
                guard let stored = fetched.version else {
                    lost.append("\(id): acknowledged v\(version), now \(fetched)")
                    continue
                }
                if stored < version || (!final.inFlight.contains(id) && stored != version) {
                    lost.append(
                        "\(id): acknowledged v\(version), in flight \(final.inFlight.contains(id)), stored v\(stored)")
                }
            }
            #expect(
                lost.isEmpty,
                "\(lost.count) objects differ from what was acknowledged: \(lost.prefix(5))\n\(daemon.log)")
            let acknowledgedEvents = final.acknowledged.values.reduce(0, +)
            let lastSeq = try #require(try connection.request(["op": "stats"]).result?["lastSeq"]?.integerValue)
            #expect(
                lastSeq >= acknowledgedEvents && lastSeq <= acknowledgedEvents + Int64(clients),
                "log of \(lastSeq) events for \(acknowledgedEvents) acknowledged writes")
        }
    }
}

/// A start after `kill -9` on the same boot resumes at LMDB's last commit and applies no journal
/// record; on another boot (an OS crash or power loss) it goes back to the checkpoint and applies
/// the journal (docs/DURABILITY.md, "Resuming after a crash of foliod alone").
@Suite struct ResumeRestartTests {
    private func create(_ connection: TestConnection, _ range: Range<Int>) throws {
        for n in range {
            try connection.send([
                "op": "create", "collection": "Item", "id": .string("i\(n)"), "data": ["n": .int(Int64(n))],
            ])
        }
        for _ in range { try #require(try connection.readJSON()?.isOK == true) }
    }

    private func expectAll(_ daemon: RunningDaemon, _ count: Int) throws {
        let connection = try daemon.connect()
        #expect(
            try connection.request(["op": "count", "collection": "Item"]).result?["count"]?.integerValue == Int64(count)
        )
        for n in [0, count / 2, count - 1] {
            #expect(try connection.request(["op": "get", "collection": "Item", "id": .string("i\(n)")]).isOK, "i\(n)")
        }
        #expect(try connection.request(["op": "verify"]).result?["ok"] == .bool(true))
    }

    @Test func aKillNineOnTheSameBootResumesAndAnotherBootReplays() throws {
        try withRunningDaemon { daemon in
            #expect(try daemon.request(["op": "stats"]).result?["journal"]?["start"] == "fresh")
            try create(try daemon.connect(), 0..<700)
            // Idle long enough for the checkpoint after the writes to end, so that no flush of
            // data.mdb is under way at the kill (one would send the start back to the checkpoint;
            // ResumeTests resumes with records past it).
            usleep(1_000_000)
            daemon.killHard()
            try daemon.start()
            #expect(daemon.log.contains("resumed at LMDB's last commit: the log ends at event 700"), "\(daemon.log)")
            let resumed = try daemon.request(["op": "stats"]).result?["journal"]
            #expect(resumed?["start"] == "resumed" && resumed?["startRecords"] == 0, "\(String(describing: resumed))")
            try expectAll(daemon, 700)

            try create(try daemon.connect(), 700..<900)
            daemon.killHard()
            daemon.environment["FOLIO_BOOT_ID"] = "another-boot"
            try daemon.start()
            let recovered =
                daemon.log.split(separator: "\n").last { $0.contains("recovered from the checkpoint") } ?? ""
            #expect(recovered.contains("the log ends at event 900"), "\(daemon.log)")
            #expect(try daemon.request(["op": "stats"]).result?["journal"]?["start"] == "recovered")
            try expectAll(daemon, 900)
        }
    }
}

/// A view defined or dropped is in `data.mdb`, by a checkpoint, before it is answered, and never in
/// the journal: a start after a crash applies the journal's records again, and a view's definition
/// builds its tree over every object of the collection (`make bench-replay`: 10 views over 800,000
/// objects, `kill -9` right after the last, 1.8 s to restart where the issue asks for under 1 s).
@Suite struct ViewRestartTests {
    /// The checkpoint sequence of the last "recovered from the checkpoint" line of foliod's log.
    private func recoveredCheckpoint(_ log: String) -> Int64? {
        let marker = "recovered from the checkpoint at event "
        guard let line = log.split(separator: "\n").last(where: { $0.contains(marker) }),
            let range = line.range(of: marker)
        else { return nil }
        return Int64(line[range.upperBound...].prefix { $0.isNumber })
    }

    @Test func aViewDefinedOrDroppedIsNotBuiltAgainAfterKillNine() throws {
        try withRunningDaemon { daemon in
            var connection = try daemon.connect()
            for batch in 0..<10 {
                for n in 0..<100 {
                    try connection.send([
                        "op": "create", "collection": "Item", "data": ["n": .int(Int64(batch * 100 + n))],
                    ])
                }
                for _ in 0..<100 { try #require(try connection.readJSON()?.isOK == true) }
            }
            for (step, request) in [
                ("define", ["op": "view.define", "name": "byN", "collection": "Item", "sort": ["n"]] as JSON),
                ("drop", ["op": "view.drop", "name": "byN"] as JSON),
            ] {
                let answer = try connection.request(request)
                let sequence = try #require(answer["seq"]?.integerValue, "\(step): \(answer)")
                daemon.killHard()
                // As after an OS crash: a crash of foliod alone resumes at LMDB's last commit and
                // applies nothing at all.
                daemon.environment["FOLIO_BOOT_ID"] = "after-\(step)"
                try daemon.start()
                let checkpoint = recoveredCheckpoint(daemon.log)
                #expect(
                    checkpoint.map { $0 >= sequence } ?? false,
                    "after the \(step) (event \(sequence)) and kill -9, recovery began at \(checkpoint.map(String.init) ?? "no checkpoint"):\n\(daemon.log)"
                )
                connection = try daemon.connect()
                let count = try connection.request(["op": "count", "view": "byN"])
                if step == "define" {
                    #expect(count.result?["count"]?.integerValue == 1000, "\(count)")
                } else {
                    #expect(count.errorCode == "not_found", "\(count)")
                }
            }
        }
    }
}

/// A start works out the views' ops not yet merged into their trees before it serves (the first
/// read of a view after a restart took 50 ms with 65,536 of them), and reads then see exactly what
/// they saw before the restart, after SIGTERM and after kill -9 (whose journal is applied first).
@Suite struct PendingViewOpsRestartTests {
    @Test func aStartWorksOutThePendingOpsOfEveryViewBeforeServing() throws {
        try withTemporaryDirectory { directory in
            let daemon = RunningDaemon(directory: directory)
            defer { daemon.shutDown() }
            // Whatever the suite runs with, no merge before 3,000 ops.
            daemon.environment["FOLIO_VIEW_BUFFER"] = "65536"
            try daemon.start()
            let connection = try daemon.connect()
            // 400 objects in the trees (a view's definition puts them in directly), the rest as ops.
            let earlier: [JSON] = (0..<400).map { n in
                [
                    "op": "create", "collection": "Item", "id": .string("p\(n)"),
                    "data": ["n": .int(Int64((n * 31) % 997)), "tag": .string("t\(n % 5)")],
                ]
            }
            for request in earlier { try connection.send(request) }
            for _ in earlier { try #require(try connection.readJSON()?.isOK == true) }
            for (name, sort) in [("byN", ["n"] as JSON), ("byTagN", ["tag", "-n"] as JSON)] {
                _ = try #require(
                    try connection.request([
                        "op": "view.define", "name": .string(name), "collection": "Item", "sort": sort,
                    ]).result)
            }
            // 1,000 creates (2 ops each), 250 updates that move both keys (4 ops each), 150 deletes
            // (2 each); of the updates and deletes, 50 each of objects in the trees.
            var requests: [JSON] = (0..<1000).map { n in
                [
                    "op": "create", "collection": "Item", "id": .string("i\(n)"),
                    "data": ["n": .int(Int64((n * 7919) % 1000)), "tag": .string("t\(n % 7)")],
                ]
            }
            requests += (0..<200).map { k in
                [
                    "op": "update", "collection": "Item", "id": .string("i\(k * 5)"),
                    "patch": ["n": .int(Int64(5000 + k))],
                ]
            }
            requests += (0..<100).map { k in ["op": "delete", "collection": "Item", "id": .string("i\(k * 10 + 1)")] }
            requests += (0..<50).map { k in
                ["op": "update", "collection": "Item", "id": .string("p\(k * 8)"), "patch": ["n": .int(Int64(-1 - k))]]
            }
            requests += (0..<50).map { k in ["op": "delete", "collection": "Item", "id": .string("p\(k * 8 + 3)")] }
            for request in requests { try connection.send(request) }
            for _ in requests { try #require(try connection.readJSON()?.isOK == true) }
            let reads: [JSON] = [
                ["op": "count", "view": "byN"], ["op": "count", "view": "byTagN"],
                ["op": "list", "view": "byN", "offset": 0, "limit": 20],
                ["op": "list", "view": "byN", "offset": 437, "limit": 20],
                ["op": "list", "view": "byN", "offset": 1180, "limit": 30],
                ["op": "list", "view": "byTagN", "offset": 250, "limit": 20],
                ["op": "list", "view": "byTagN", "offset": 3, "limit": 5, "order": "desc"],
            ]
            let before = try reads.map { try connection.request($0) }
            #expect(
                before[0].result?["count"] == 1250 && before[1].result?["count"] == 1250, "\(before[0]) \(before[1])")
            connection.close()
            let line = "views: 3300 op(s) not yet merged into 2 view(s) worked out in "
            for (stop, starts) in [("SIGTERM", 1), ("kill -9", 2)] {
                if stop == "SIGTERM" {
                    try daemon.restart()
                } else {
                    daemon.killHard()
                    try daemon.start()
                }
                #expect(daemon.log.components(separatedBy: line).count - 1 == starts, "after \(stop): \(daemon.log)")
                let reopened = try daemon.connect()
                for (request, answer) in zip(reads, before) {
                    let again = try reopened.request(request)
                    #expect(again.result == answer.result, "after \(stop), \(request): \(again) against \(answer)")
                }
                reopened.close()
            }
        }
    }
}

@Suite struct LeftoverScratchTests {
    /// A verify killed mid-run left its scratch store in the data directory for good (one 1,000-cycle
    /// crash loop left 215 of them): the next start removes them.
    @Test func aStartRemovesTheScratchStoresOfUnfinishedVerifies() throws {
        try withTemporaryDirectory { directory in
            let daemon = RunningDaemon(directory: directory)
            defer { daemon.shutDown() }
            let scratch = daemon.dataDirectory + "/verify-4242-17"
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
            FileManager.default.createFile(atPath: scratch + "/data.mdb", contents: Data(repeating: 0, count: 4096))
            FileManager.default.createFile(atPath: daemon.dataDirectory + "/verify.txt.keep", contents: Data())
            try daemon.start()
            #expect(!FileManager.default.fileExists(atPath: scratch))
            #expect(try daemon.request(["op": "verify"]).result?["ok"] == true)
            #expect(daemon.log.contains("removed verify-4242-17"))
        }
    }
}
