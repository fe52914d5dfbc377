import FolioHarness
import FolioJSON
import Foundation
import Glibc
import Testing

/// foliod under an LD_PRELOAD library (Tests/Faults/iofault.c) that makes its writes, flushes and
/// opens of files in the data directory fail with EIO or ENOSPC. Every failure is answered with an
/// error, never a false success; reads go on; and either writes resume once the fault clears (a
/// write refused before its commit's meta page), or foliod stops with EX_IOERR (a failed flush, a
/// failed meta page) and a restart recovers. Nothing acknowledged is lost (`WriteLoad.check`).
@Suite struct IOFaultTests {
    /// The first page LMDB writes data to: below it are the two meta pages.
    static let firstDataPage = 8192

    /// Data pages refused (a device out of space): the batches are answered `unavailable`, reads
    /// and `verify` go on, and writes resume without a restart once the fault clears.
    @Test(arguments: ["ENOSPC", "EIO"])
    func refusedPageWritesFailTheirBatchesAndWritesResume(error: String) throws {
        try withShimmedDaemon { daemon, shim in
            let load = WriteLoad()
            load.start(socket: daemon.socketPath)
            #expect(load.wait { $0.acknowledged > 50 })
            try shim.set(
                .init(
                    calls: "write", nth: 1, error: error, sticky: true, path: daemon.dataDirectory + "/data.mdb",
                    from: Self.firstDataPage))
            #expect(load.wait { $0.refused > 20 }, "refused \(load.refused)")
            let connection = try daemon.connect()
            let stats = try connection.request(["op": "stats"])
            #expect(stats.isOK, "reads go on: \(stats)")
            #expect((stats.result?["failedCommits"]?.integerValue ?? 0) > 0)
            #expect(try connection.request(["op": "verify"]).result?["ok"] == .bool(true))
            try shim.clear()
            let resumed = load.acknowledged
            #expect(load.wait { $0.acknowledged > resumed + 50 }, "writes resume without a restart")
            load.stop()
            #expect(daemon.isRunning)
            #expect(load.doubtful == 0)
            #expect(!shim.injected.isEmpty)
            try expectRecovered(daemon, load)
        }
    }

    /// A meta page that cannot be written makes LMDB refuse the environment (MDB_PANIC): foliod
    /// stops with EX_IOERR rather than serve errors forever, and a restart finds the last commit.
    @Test func aFailedMetaPageWriteStopsFoliod() throws {
        try withShimmedDaemon { daemon, shim in
            let load = WriteLoad()
            load.start(socket: daemon.socketPath)
            #expect(load.wait { $0.acknowledged > 50 })
            try shim.set(
                .init(
                    calls: "write", nth: 1, error: "EIO", sticky: false, path: daemon.dataDirectory + "/data.mdb",
                    below: Self.firstDataPage))
            load.wait(timeout: 60) { !$0.isRunning }
            #expect(daemon.waitForExit(timeout: 20) == FailpointTests.ioErrorStatus, "\(daemon.log)")
            #expect(daemon.log.contains("a failed write of LMDB's meta page"))
            try expectRecovered(daemon, load)
        }
    }

    /// A failed fdatasync of data.mdb, once, in each durability mode (full without the journal,
    /// whose commits sync data.mdb): foliod answers the writes in doubt `unavailable`, never
    /// acknowledges a later write (a second flush would succeed without the lost pages), and stops
    /// with EX_IOERR; a restart recovers.
    @Test(arguments: ["full", "relaxed", "none"])
    func aFailedFlushStopsFoliod(durability: String) throws {
        let journal = durability == "full" ? ["--journal", "off"] : []
        try withShimmedDaemon(arguments: ["--durability", durability] + journal) { daemon, shim in
            let load = WriteLoad()
            load.start(socket: daemon.socketPath)
            #expect(load.wait { $0.acknowledged > 50 })
            try shim.set(
                .init(calls: "fdatasync", nth: 1, error: "EIO", sticky: false, path: daemon.dataDirectory + "/data.mdb")
            )
            let acknowledgedBefore = load.acknowledged
            load.wait(timeout: 60) { !$0.isRunning }
            #expect(daemon.waitForExit(timeout: 20) == FailpointTests.ioErrorStatus, "\(daemon.log)")
            #expect(
                daemon.log.contains("a failed flush of data.mdb (fdatasync data.mdb: Input/output error)"),
                "\(daemon.log)")
            #expect(shim.injected.first?.hasPrefix("fdatasync EIO") == true, "\(shim.injected)")
            if durability != "none" {
                // Any write acknowledged after the fault had its commit flushed after it: none may be.
                #expect(
                    load.acknowledged - acknowledgedBefore < 50,
                    "writes went on being acknowledged after a failed flush")
            }
            try expectRecovered(daemon, load)
        }
    }

    /// With the journal, a failed sync of the journal, or of data.mdb at a checkpoint, is as final:
    /// the writes in doubt are answered `unavailable` (after a failed journal sync, none later is
    /// acknowledged), foliod stops with EX_IOERR, and a restart recovers every acknowledged write
    /// from the last checkpoint that flushed and the journal.
    @Test(arguments: ["journal", "data.mdb"])
    func aFailedFlushWithTheJournalStopsFoliod(file: String) throws {
        try withShimmedDaemon(arguments: ["--journal", "on"]) { daemon, shim in
            let load = WriteLoad()
            load.start(socket: daemon.socketPath)
            #expect(load.wait { $0.acknowledged > 50 })
            try shim.set(
                .init(calls: "fdatasync", nth: 1, error: "EIO", sticky: false, path: daemon.dataDirectory + "/" + file))
            let acknowledgedBefore = load.acknowledged
            load.wait(timeout: 60) { !$0.isRunning }
            #expect(daemon.waitForExit(timeout: 20) == FailpointTests.ioErrorStatus, "\(daemon.log)")
            let reason =
                file == "journal" ? "a failed write or flush of the journal" : "a failed checkpoint of data.mdb"
            #expect(daemon.log.contains(reason), "\(daemon.log)")
            if file == "journal" {
                #expect(
                    load.acknowledged - acknowledgedBefore < 50,
                    "writes went on being acknowledged after a failed flush")
            }
            // Writes answered after a failed checkpoint are in the journal, which still holds every
            // record since the last checkpoint that did flush: the restart brings them all back.
            try expectRecovered(daemon, load)
            if file == "data.mdb" {
                // The failed flush left the resume marker `dirty`: on the same boot, the start
                // after it went back to the checkpoint rather than trust the page cache.
                let starts = daemon.log.components(separatedBy: "stopped after a failed checkpoint").last ?? ""
                #expect(starts.contains("recovered from the checkpoint"), "\(daemon.log)")
            }
        }
    }

    /// With the journal, a commit refused for lack of space is followed by a flush of data.mdb
    /// (is the environment still writable?). When that flush fails, it leaves the resume marker
    /// `dirty` as a checkpoint's does: it went through the journal. It bypassed the journal
    /// before, and the marker kept saying `clean` from the last checkpoint, so the start after the
    /// stop, on the same boot, trusted the page cache over the failed write-back.
    @Test func aFailedFlushAfterAFailedCommitLeavesTheMarkerDirty() throws {
        try withShimmedDaemon(arguments: ["--journal", "on"]) { daemon, shim in
            let load = WriteLoad()
            load.start(socket: daemon.socketPath)
            #expect(load.wait { $0.acknowledged > 50 })
            try shim.set([
                .init(
                    calls: "write", nth: 1, error: "ENOSPC", sticky: true, path: daemon.dataDirectory + "/data.mdb",
                    from: Self.firstDataPage),
                .init(
                    calls: "fdatasync", nth: 1, error: "EIO", sticky: false, path: daemon.dataDirectory + "/data.mdb"),
            ])
            load.wait(timeout: 60) { !$0.isRunning }
            #expect(daemon.waitForExit(timeout: 20) == FailpointTests.ioErrorStatus, "\(daemon.log)")
            #expect(daemon.log.contains("fdatasync data.mdb: Input/output error"), "\(daemon.log)")
            try shim.clear()
            try expectRecovered(daemon, load)
            // The first start after the stop (the restart after it may resume: it follows a clean stop).
            let starts = daemon.log.components(separatedBy: "exit status 74").last ?? ""
            let first = starts.components(separatedBy: "serving").first ?? ""
            #expect(first.contains("recovered from the checkpoint"), "\(daemon.log)")
            #expect(!first.contains("resumed at LMDB's last commit"), "\(daemon.log)")
        }
    }

    /// With `relaxed`, the flush at SIGTERM is the one that puts the last commits' meta pages on
    /// disk: if it fails, foliod says so and exits with EX_IOERR, not 0.
    @Test func aFailedFinalFlushIsNotAQuietStop() throws {
        try withShimmedDaemon(arguments: ["--durability", "relaxed"]) { daemon, shim in
            let created = try daemon.request(["op": "create", "collection": "Note", "data": ["text": "last"]])
            #expect(created.isOK)
            try shim.set(
                .init(calls: "fdatasync", nth: 1, error: "EIO", sticky: true, path: daemon.dataDirectory + "/data.mdb"))
            #expect(try daemon.stop() == FailpointTests.ioErrorStatus, "\(daemon.log)")
            #expect(daemon.log.contains("the final flush of data.mdb failed"))
            try shim.clear()
            daemon.environment = [:]
            try daemon.start()
            #expect(try daemon.request(["op": "stats"]).result?["collections"]?["Note"] == 1)
        }
    }

    /// foliod cannot open or prepare its files: it refuses to start with a message naming the call,
    /// and starts cleanly once the fault is gone.
    @Test(arguments: [("open", "data.mdb"), ("open", "lock.mdb"), ("write", "lock.mdb")])
    func aStartThatCannotOpenItsFilesSaysWhy(call: String, file: String) throws {
        try withShimmedDaemon(start: false) { daemon, shim in
            try FileManager.default.createDirectory(atPath: daemon.dataDirectory, withIntermediateDirectories: true)
            try shim.set(
                .init(calls: call, nth: 1, error: "EIO", sticky: true, path: daemon.dataDirectory + "/" + file))
            #expect(throws: DaemonError.self) { try daemon.start() }
            #expect(daemon.log.contains("cannot start:") && daemon.log.contains("Input/output error"), "\(daemon.log)")
            #expect(!shim.injected.isEmpty)
            try shim.clear()
            try daemon.start()
            #expect(try daemon.request(["op": "create", "collection": "Note", "data": ["n": 1]]).isOK)
        }
    }

    /// A backup whose copy cannot be written or flushed is refused and leaves its directory empty;
    /// foliod goes on, and the next backup is whole and flushed.
    @Test(arguments: [("write", "ENOSPC"), ("fdatasync", "EIO"), ("fsync", "EIO")])
    func aBackupThatCannotBeWrittenOrFlushedIsRefused(call: String, error: String) throws {
        try withShimmedDaemon { daemon, shim in
            for index in 0..<50 {
                #expect(
                    try daemon.request(["op": "create", "collection": "Note", "data": ["n": .int(Int64(index))]]).isOK)
            }
            let target = daemon.directory + "/backups/b1"
            try shim.set(.init(calls: call, nth: 1, error: error, sticky: true, path: daemon.directory + "/backups"))
            let refused = try daemon.request(["op": "backup", "directory": .string(target)])
            #expect(refused.errorCode == "unavailable", "\(refused)")
            #expect(!shim.injected.isEmpty, "the backup made no \(call)")
            #expect((try? FileManager.default.contentsOfDirectory(atPath: target))?.isEmpty ?? true)
            #expect(try daemon.request(["op": "create", "collection": "Note", "data": ["n": -1]]).isOK)
            try shim.clear()
            let done = try daemon.request(["op": "backup", "directory": .string(target)])
            #expect(done.result?["lastSeq"] == 51, "\(done)")
            try daemon.restart()
        }
    }

    /// Offline, a rebuild flushes each chunk before it goes on (so an OS crash cannot leave a meta
    /// page pointing at unwritten pages): a failed flush stops it with an error, the store stays
    /// marked, and a second rebuild finishes.
    @Test func aRebuildStopsAtAFailedFlush() throws {
        // Without the journal, so that the store the rebuild opens has none to apply and remove
        // first (which flushes data.mdb too) and the flushes counted are the rebuild's own.
        try withShimmedDaemon(arguments: ["--journal", "off"]) { daemon, shim in
            for index in 0..<30 {
                #expect(
                    try daemon.request(["op": "create", "collection": "Note", "data": ["n": .int(Int64(index))]]).isOK)
            }
            #expect(try daemon.stop() == 0)
            // The rebuild's first commit (marking the store) is flushed first: the second flush is
            // its chunk's.
            try shim.set(
                .init(calls: "fdatasync", nth: 2, error: "EIO", sticky: false, path: daemon.dataDirectory + "/data.mdb")
            )
            let failed = try CommandRun.run(
                Binaries.foliod, ["rebuild", "--data", daemon.dataDirectory], environment: shim.environment)
            #expect(failed.status == 1 && failed.stderr.contains("Input/output error"), "\(failed)")
            try shim.clear()
            #expect(throws: DaemonError.self) { try daemon.start() }
            let again = try CommandRun.run(Binaries.foliod, ["rebuild", "--data", daemon.dataDirectory])
            #expect(again.status == 0, "\(again)")
            daemon.environment = [:]
            try daemon.start()
            #expect(try daemon.request(["op": "verify"]).result?["ok"] == .bool(true))
            #expect(try daemon.request(["op": "stats"]).result?["collections"]?["Note"] == 30)
        }
    }

    /// An import that cannot write or flush its store fails and leaves nothing behind.
    @Test(arguments: [("write", "ENOSPC"), ("fdatasync", "EIO"), ("fsync", "EIO")])
    func anImportThatCannotBeWrittenLeavesNothing(call: String, error: String) throws {
        try withShimmedDaemon { daemon, shim in
            for index in 0..<30 {
                #expect(
                    try daemon.request(["op": "create", "collection": "Note", "data": ["n": .int(Int64(index))]]).isOK)
            }
            let export = try CommandRun.run(
                Binaries.folio, ["export"], environment: ["FOLIO_SOCKET": daemon.socketPath])
            #expect(export.status == 0)
            let file = daemon.directory + "/events.jsonl"
            try export.stdout.write(toFile: file, atomically: false, encoding: .utf8)
            let imports = daemon.directory + "/imports"
            try FileManager.default.createDirectory(atPath: imports, withIntermediateDirectories: false)
            try shim.set(.init(calls: call, nth: 1, error: error, sticky: true, path: imports))
            let failed = try CommandRun.run(
                Binaries.foliod, ["import", "--data", imports + "/new", file], environment: shim.environment)
            #expect(failed.status == 1, "\(failed)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: imports).isEmpty)
            try shim.clear()
            let done = try CommandRun.run(Binaries.foliod, ["import", "--data", imports + "/new", file])
            #expect(done.status == 0, "\(done)")
        }
    }
}

/// Runs `body` with a foliod under the I/O fault library (no fault set yet), built in the test's
/// temporary directory; started first unless `start` is false.
func withShimmedDaemon(
    arguments: [String] = [], start: Bool = true, _ body: (RunningDaemon, IOFaultShim) throws -> Void
) throws {
    try withTemporaryDirectory { directory in
        let shim = try IOFaultShim(in: directory)
        try withFaultyDaemon(arguments: arguments, environment: shim.environment, start: false) { daemon in
            if start { try daemon.start() }
            try body(daemon, shim)
        }
    }
}
