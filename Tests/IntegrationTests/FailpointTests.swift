import FolioHarness
import FolioJSON
import Foundation
import Glibc
import Testing

/// foliod (a debug build, whose failpoints `FOLIO_FAILPOINTS` arms) crashes or fails at each named
/// point of the write path under a load of clients, and a foliod started again on the same data
/// holds what the answers promised (`WriteLoad.check`), verifies clean and restarts clean.
@Suite struct FailpointTests {
    /// The status `_exit` gives a process ended by a crash failpoint (`Failpoint.crashStatus`).
    static let crashStatus: Int32 = 86
    /// foliod's exit status after a failed flush (`Daemon.ioErrorStatus`).
    static let ioErrorStatus: Int32 = 74

    struct Crash: CustomTestStringConvertible, Sendable {
        let point: String
        let pass: Int
        let durability: String
        var testDescription: String { "\(point)=crash@\(pass), --durability \(durability)" }
    }

    static let crashes: [Crash] = [
        Crash(point: "writer.beforeCommit", pass: 40, durability: "full"),
        Crash(point: "writer.afterJournal", pass: 40, durability: "full"),
        Crash(point: "writer.midBatch", pass: 60, durability: "full"),
        Crash(point: "store.afterLogAppend", pass: 60, durability: "relaxed"),
        Crash(point: "writer.afterCommit", pass: 40, durability: "full"),
        Crash(point: "writer.afterCommit", pass: 40, durability: "none"),
        Crash(point: "confirm.beforeSync", pass: 30, durability: "full"),
        Crash(point: "confirm.afterSync", pass: 30, durability: "full"),
    ]

    @Test(arguments: crashes)
    func aCrashLosesNothingAcknowledged(_ crash: Crash) throws {
        try withFaultyDaemon(
            arguments: ["--durability", crash.durability], failpoints: "\(crash.point)=crash@\(crash.pass)"
        ) { daemon in
            let load = WriteLoad()
            load.start(socket: daemon.socketPath)
            load.wait(timeout: 60) { !$0.isRunning }
            let status = daemon.waitForExit(timeout: 20)
            #expect(status == Self.crashStatus, "foliod should have crashed at \(crash.point); its log:\n\(daemon.log)")
            #expect(daemon.log.contains("failpoint \(crash.point): crashing"))
            #expect(load.acknowledged > 0, "writes were acknowledged before the crash")
            try expectRecovered(daemon, load)
        }
    }

    /// A failure inside the batch's transaction fails every write of the batch, changes nothing,
    /// and writes go on.
    @Test(arguments: ["writer.beforeCommit", "writer.afterJournal", "writer.midBatch", "store.afterLogAppend"])
    func anErrorInTheTransactionFailsTheBatchAndWritesGoOn(point: String) throws {
        try withFaultyDaemon(failpoints: "\(point)=error@30") { daemon in
            let load = WriteLoad()
            load.start(socket: daemon.socketPath)
            #expect(
                load.wait { $0.refused > 0 && $0.acknowledged > 100 },
                "refused \(load.refused), acknowledged \(load.acknowledged)")
            load.stop()
            #expect(load.doubtful == 0)
            #expect(daemon.isRunning)
            try expectRecovered(daemon, load)
        }
    }

    /// A commit that fails after its record went to the journal (the 30th batch), then a crash a
    /// few commits later (the next record reuses its sequences; the refusal has been answered by
    /// then), most likely before a checkpoint covered them: the restart, on another boot, skips the
    /// cancelled record,
    /// so the refused writes are not there and nothing after them is lost.
    @Test func aCommitFailingAfterItsJournalRecordIsCancelled() throws {
        try withFaultyDaemon(failpoints: "writer.afterJournal=error@30,writer.afterCommit=crash@45") { daemon in
            let load = WriteLoad()
            load.start(socket: daemon.socketPath)
            load.wait(timeout: 60) { !$0.isRunning }
            #expect(daemon.waitForExit(timeout: 20) == Self.crashStatus, "\(daemon.log)")
            #expect(load.refused > 0, "the failed commit's writes were refused as not stored")
            // On another boot, so that the restart applies the journal and meets the cancel.
            try expectRecovered(daemon, load, boot: "another-boot")
            #expect(daemon.log.contains("recovered from the checkpoint"), "\(daemon.log)")
        }
    }

    /// The commit of the 5th write fails after its record went to the journal, and the journal's
    /// sync that was to cover the record or its cancel fails too: the cancel may not be on disk, so
    /// the write is answered in doubt, not as refused; foliod stops, and a restart holds the four
    /// writes before it. (One client, one write at a time: the n-th write's record is the n-th sync.)
    @Test func aFailedCommitWhoseCancelWasNotFlushedIsInDoubt() throws {
        try withFaultyDaemon(failpoints: "writer.afterJournal=error@5,confirm.beforeSync=error@5") { daemon in
            let connection = try daemon.connect()
            var answers: [JSON] = []
            for index in 1...5 {
                answers.append(
                    try connection.request([
                        "op": "create", "collection": "Note", "id": .string("n\(index)"),
                        "data": ["n": .int(Int64(index))],
                    ]))
            }
            let firstFour = answers.prefix(4).allSatisfy { $0.isOK }
            #expect(firstFour, "\(answers)")
            #expect(answers[4].errorCode == "unavailable", "\(answers[4])")
            #expect(answers[4].errorMessage?.contains("it may be stored or not") == true, "\(answers[4])")
            #expect(daemon.waitForExit(timeout: 20) == Self.ioErrorStatus, "\(daemon.log)")
            daemon.environment = ["FOLIO_BOOT_ID": "another-boot"]
            try daemon.start()
            for index in 1...4 {
                #expect(try daemon.request(["op": "get", "collection": "Note", "id": .string("n\(index)")]).isOK)
            }
            #expect(try daemon.request(["op": "verify"]).result?["ok"] == .bool(true))
        }
    }

    /// One client, one write at a time: each write is a batch of its own, whose journal record goes
    /// out as soon as its event is logged, before the event is applied. The 5th write fails right
    /// after that (its record handed over, then cancelled: answered as not stored), the next reuses
    /// its sequence, and the 9th commit crashes foliod, most likely before a checkpoint covered any
    /// of it: the restart skips the cancelled record and holds every acknowledged write.
    @Test func aLoneWriteFailingAfterItsEarlyRecordIsCancelled() throws {
        try withFaultyDaemon(failpoints: "store.afterLogAppend=error@5,writer.afterCommit=crash@9") { daemon in
            let connection = try daemon.connect()
            func create(_ index: Int) throws -> JSON {
                try connection.request([
                    "op": "create", "collection": "Note", "id": .string("n\(index)"), "data": ["n": .int(Int64(index))],
                ])
            }
            var answers: [JSON] = []
            for index in 1...8 { answers.append(try create(index)) }
            #expect(answers.enumerated().allSatisfy { $0.offset == 4 || $0.element.isOK }, "\(answers)")
            #expect(
                answers[4].errorCode == "unavailable" && answers[4].errorMessage?.contains("not stored") == true,
                "\(answers[4])")
            // Every one of the eight went to the journal early, the failed one too.
            let metrics = try connection.request(["op": "metrics"]).result?["text"]?.stringValue ?? ""
            #expect(metrics.contains("folio_journal_early_records_total 8\n"), "\(metrics)")
            #expect(try create(9).isOK)
            _ = try? create(10)
            #expect(daemon.waitForExit(timeout: 20) == Self.crashStatus, "\(daemon.log)")
            // On another boot, so that the restart applies the journal and meets the cancel.
            daemon.environment = ["FOLIO_BOOT_ID": "another-boot"]
            try daemon.start()
            #expect(daemon.log.contains("recovered from the checkpoint"), "\(daemon.log)")
            for index in [1, 2, 3, 4, 6, 7, 8, 9] {
                #expect(
                    try daemon.request(["op": "get", "collection": "Note", "id": .string("n\(index)")]).isOK,
                    "n\(index)")
            }
            #expect(try daemon.request(["op": "get", "collection": "Note", "id": "n5"]).errorCode == "not_found")
            #expect(try daemon.request(["op": "verify"]).result?["ok"] == .bool(true))
        }
    }

    /// A failed flush of the meta page answers its writes `unavailable` (applied, not durable), and
    /// foliod stops with EX_IOERR instead of acknowledging writes built on it.
    @Test func aFailedMetaFlushStopsFoliod() throws {
        try withFaultyDaemon(arguments: ["--journal", "off"], failpoints: "confirm.beforeSync=error@30") { daemon in
            let load = WriteLoad()
            load.start(socket: daemon.socketPath)
            load.wait(timeout: 60) { !$0.isRunning }
            #expect(daemon.waitForExit(timeout: 20) == Self.ioErrorStatus, "\(daemon.log)")
            #expect(daemon.log.contains("failed flush of data.mdb (failpoint confirm.beforeSync injected an error)"))
            #expect(load.doubtful > 0, "the writes of the failed flush were answered as in doubt")
            try expectRecovered(daemon, load)
        }
    }

    /// The map fills (1 MiB) and must grow: a failed growth is retried, a crash in it loses nothing.
    /// With the journal (full durability's default) the map fills sooner: the pages of the last
    /// checkpoint stay pinned until the next, so commits in between cannot reuse them.
    @Test(arguments: ["error@1", "crash@1"], [false, true])
    func mapGrowthFailsOrCrashes(action: String, journal: Bool) throws {
        let arguments = ["--map-size", "1048576", "--journal", journal ? "on" : "off"]
        try withFaultyDaemon(arguments: arguments, failpoints: "lmdb.growMap=\(action)") { daemon in
            let load = WriteLoad(payloadBytes: 1000)
            load.start(socket: daemon.socketPath)
            if action.hasPrefix("crash") {
                load.wait(timeout: 60) { !$0.isRunning }
                #expect(daemon.waitForExit(timeout: 20) == Self.crashStatus, "\(daemon.log)")
            } else {
                #expect(load.wait(timeout: 60) { _ in daemon.log.contains("map full: grew it") })
                let grown = load.acknowledged
                #expect(load.wait { $0.acknowledged > grown + 100 })
                load.stop()
                #expect(daemon.log.contains("map full and could not grow it: mdb_env_set_mapsize (failpoint)"))
                #expect(load.refused == 0, "a failed growth is retried, not answered")
            }
            #expect(load.acknowledged > (journal ? 20 : 500), "the map filled: \(load.acknowledged) writes")
            try expectRecovered(daemon, load)
        }
    }

    /// A backup that fails after its copy leaves the directory empty and foliod serving; one that
    /// crashes foliod there loses no acknowledged write.
    @Test(arguments: ["error@1", "crash@1"])
    func backupFailsOrCrashesAfterItsCopy(action: String) throws {
        try withFaultyDaemon(failpoints: "backup.afterCopy=\(action)") { daemon in
            let load = WriteLoad()
            load.start(socket: daemon.socketPath)
            #expect(load.wait { $0.acknowledged > 100 })
            let target = daemon.directory + "/backup"
            let backup = try? daemon.connect().request(["op": "backup", "directory": .string(target)])
            if action.hasPrefix("crash") {
                #expect(backup == nil, "no answer from a crashed foliod: \(String(describing: backup))")
                load.wait(timeout: 60) { !$0.isRunning }
                #expect(daemon.waitForExit(timeout: 20) == Self.crashStatus, "\(daemon.log)")
            } else {
                #expect(backup?.errorCode == "bad_request", "\(String(describing: backup))")
                #expect(try FileManager.default.contentsOfDirectory(atPath: target).isEmpty)
                let again = try daemon.connect().request(["op": "backup", "directory": .string(target)])
                #expect(again.isOK, "\(again)")
                let verified = try CommandRun.run(Binaries.foliod, ["verify", "--data", target])
                #expect(verified.status == 0, "\(verified)")
                load.stop()
            }
            try expectRecovered(daemon, load)
        }
    }

    /// A rebuild that crashes or fails between chunks leaves the store marked: foliod refuses it
    /// until a rebuild completes, and then it holds every event.
    @Test(arguments: ["error@1", "crash@1"])
    func rebuildStopsBetweenChunks(action: String) throws {
        try withFaultyDaemon(arguments: ["--durability", "relaxed"], failpoints: "") { daemon in
            let count = 10_500  // two chunks of the rebuild, of 10,000 here (FOLIO_REBUILD_CHUNK)
            let connection = try daemon.connect()
            var created = 0
            for round in stride(from: 0, to: count, by: 500) {
                let requests = (round..<min(count, round + 500)).flatMap { index -> [UInt8] in
                    let request: JSON = ["op": "create", "collection": "Bulk", "data": ["n": .int(Int64(index))]]
                    return request.serialized() + [0x0A]
                }
                try connection.send(bytes: requests)
                for _ in round..<min(count, round + 500) {
                    if try connection.readResponse().isOK { created += 1 }
                }
            }
            #expect(created == count)
            let before = try #require(try daemon.request(["op": "stats"]).result)
            #expect(try daemon.stop() == 0)

            let rebuild = try CommandRun.run(
                Binaries.foliod, ["rebuild", "--data", daemon.dataDirectory],
                environment: ["FOLIO_FAILPOINTS": "rebuild.afterChunk=\(action)", "FOLIO_REBUILD_CHUNK": "10000"])
            if action.hasPrefix("crash") {
                #expect(rebuild.status == Self.crashStatus, "\(rebuild)")
            } else {
                #expect(rebuild.status == 1 && rebuild.stderr.contains("failpoint rebuild.afterChunk"), "\(rebuild)")
            }
            #expect(throws: DaemonError.self) { try daemon.start() }
            #expect(daemon.log.contains("a rebuild was interrupted"))

            let again = try CommandRun.run(Binaries.foliod, ["rebuild", "--data", daemon.dataDirectory])
            #expect(again.status == 0, "\(again)")
            daemon.environment = [:]
            try daemon.start()
            let after = try #require(try daemon.request(["op": "stats"]).result)
            #expect(after["collections"]?["Bulk"] == .int(Int64(count)))
            #expect(after["digest"] == before["digest"], "the rebuilt state is the state before")
            #expect(try daemon.request(["op": "verify"]).result?["ok"] == .bool(true))
        }
    }

    @Test func aMistypedFailpointStopsFoliodAtStart() throws {
        try withFaultyDaemon(failpoints: "writer.beforeComit=crash", start: false) { daemon in
            #expect(throws: DaemonError.self) { try daemon.start() }
            #expect(
                daemon.log.contains("FOLIO_FAILPOINTS: unknown failpoint in \"writer.beforeComit=crash\""),
                "\(daemon.log)")
        }
    }
}

/// Runs `body` with a foliod in a temporary directory whose environment arms `failpoints` and adds
/// `environment`; started first unless `start` is false. Whatever still runs is stopped afterwards.
func withFaultyDaemon(
    arguments: [String] = [], failpoints: String = "", environment: [String: String] = [:], start: Bool = true,
    _ body: (RunningDaemon) throws -> Void
) throws {
    try withTemporaryDirectory { directory in
        let daemon = RunningDaemon(directory: directory, arguments: arguments)
        daemon.environment = environment.merging(["FOLIO_FAILPOINTS": failpoints]) { $1 }
        defer { daemon.shutDown() }
        if start { try daemon.start() }
        do {
            try body(daemon)
        } catch {
            Issue.record("foliod log:\n\(daemon.log)")
            throw error
        }
    }
}

/// Starts foliod again without faults (if it is not running, else stops and restarts it), checks
/// that it holds what `load` was promised, and that it stops and starts cleanly once more.
/// With `boot`, foliod starts as on a machine that restarted (`FOLIO_BOOT_ID`): after a crash it
/// goes back to the checkpoint and applies the journal instead of resuming at LMDB's last commit.
func expectRecovered(
    _ daemon: RunningDaemon, _ load: WriteLoad, boot: String? = nil, sourceLocation: SourceLocation = #_sourceLocation
) throws {
    load.stop()
    if daemon.isRunning { #expect(try daemon.stop() == 0, sourceLocation: sourceLocation) }
    _ = daemon.waitForExit(timeout: 0)
    daemon.environment = boot.map { ["FOLIO_BOOT_ID": $0] } ?? [:]
    try daemon.start()
    let problems = try load.check(daemon)
    #expect(
        problems.isEmpty, "\(problems.count) problems: \(problems.prefix(8))\nfoliod log:\n\(daemon.log)",
        sourceLocation: sourceLocation)
    try daemon.restart()
    #expect(try daemon.request(["op": "hello"]).isOK, sourceLocation: sourceLocation)
}
