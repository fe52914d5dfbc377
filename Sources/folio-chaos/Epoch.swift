import FolioClient
import FolioHarness
import FolioJSON
import Foundation
import Glibc

/// One data directory and the crash cycles run on it, all decided by one seed: the clients'
/// requests, the crash points and the delays.
final class Epoch: StoreEpoch {
    let seed: UInt64
    let directory: String
    private let options: ChaosOptions
    private let foliod: Foliod
    private let ledgers: [ClientLedger]
    private let logged = LoggedState()
    private var random: SplitMix64
    /// Durations measured so far, to time kills inside start-up, verify and backup.
    private var startupSeconds = 0.05
    private var verifySeconds = 0.05
    private var backupSeconds = 0.05
    private var backupCounter = 0

    init(seed: UInt64, directory: String, options: ChaosOptions) {
        self.seed = seed
        self.directory = directory
        self.options = options
        foliod = Foliod(
            binary: options.foliod, directory: directory, mapSize: options.mapSize, durability: options.durability,
            extraArguments: options.foliodArguments, powerLoss: options.powerLoss, seed: seed)
        ledgers = (0..<options.clients).map { ClientLedger(client: $0) }
        random = SplitMix64(seed: seed)
    }

    /// Runs cycle `index` (0-based within this store); throws the first violation.
    func cycle(_ index: Int, _ tally: inout Tally) throws {
        // A violation leaves the data directory as the checks found it.
        defer { foliod.abandon() }
        var phases = PhaseClock()
        defer { tally.add(phases) }
        let plan = CyclePlan(&random, workloadMilliseconds: options.workloadMilliseconds)
        let point = plan.point
        tally.crashPoints[point, default: 0] += 1
        for fraction in plan.startupKills {
            try foliod.spawn()
            sleep(seconds: fraction * startupSeconds)
            try kill(&tally)
            tally.startupKills += 1
        }
        // The store's files as they are before the workload (the journal's two with data.mdb: a
        // data.mdb put back beside a later checkpoint would not be a store that lost writes).
        let storeFiles = ["data.mdb", "journal", "checkpoint"]
        let saved = { [directory] (file: String) in directory + "/saved-" + file }
        let losingWrites = options.loseWrites && index > 0
        if losingWrites {
            for file in storeFiles {
                try? FileManager.default.removeItem(atPath: saved(file))
                try? FileManager.default.copyItem(atPath: foliod.dataDirectory + "/" + file, toPath: saved(file))
            }
        }
        try foliod.spawn()
        startupSeconds = try foliod.waitUntilServing(timeout: 60)
        while foliod.mapGrowths.wait(timeout: .now()) == .success {}
        if index == 0 { try defineSchemas() }
        phases.end("start")

        let killAt = plan.killAfterMilliseconds
        var tasks: [(afterMilliseconds: Int, task: ServiceClient.Task)] = []
        if let after = plan.verifyAfterMilliseconds { tasks.append((after, .verify)) }
        if let after = plan.backupAfterMilliseconds { tasks.append((after, .backup(directory: nextBackupDirectory()))) }
        tasks.sort { $0.afterMilliseconds < $1.afterMilliseconds }
        let clients = ledgers.map { ledger in
            WorkloadClient(
                ledger: ledger, seed: seed &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(index) << 16 &+ UInt64(ledger.client),
                socketPath: foliod.socketPath,
                timeout: 30, faults: options.faults)
        }
        let service = ServiceClient(socketPath: foliod.socketPath, tasks: tasks, timeout: 120)
        let finished = DispatchGroup()
        let bodies: [@Sendable () -> Void] = clients.map { client in { client.run() } } + [{ service.run() }]
        for body in bodies {
            finished.enter()
            Thread {
                body()
                finished.leave()
            }.start()
        }

        // Wait for the crash point, then kill.
        switch point {
        case .workload, .startup:
            sleep(seconds: Double(killAt) / 1000)
        case .verify, .backup:
            if service.sent.wait(timeout: .now() + .milliseconds(killAt + 5_000)) == .success {
                sleep(seconds: plan.killFraction * (point == .verify ? verifySeconds : backupSeconds))
            }
        case .mapGrowth:
            if foliod.mapGrowths.wait(timeout: .now() + .milliseconds(max(killAt, 3_000))) == .success {
                tally.mapGrowthKills += 1
                sleep(seconds: plan.growthDelaySeconds)
            }
        case .staleReader:
            sleep(seconds: Double(plan.readerAfterMilliseconds) / 1000)
            if try StaleReader.leave(in: foliod.dataDirectory) != nil { tally.staleReaders += 1 }
            sleep(seconds: Double(killAt - plan.readerAfterMilliseconds) / 1000)
        }
        let aliveAtKill = foliod.isRunning
        try kill(&tally)
        if losingWrites {
            for file in storeFiles + ["lock.mdb"] {
                try? FileManager.default.removeItem(atPath: foliod.dataDirectory + "/" + file)
            }
            for file in storeFiles {
                try? FileManager.default.copyItem(atPath: saved(file), toPath: foliod.dataDirectory + "/" + file)
            }
        }
        if finished.wait(timeout: .now() + 60) == .timedOut {
            throw Violation("clients still waiting 60 s after foliod was killed")
        }
        if !aliveAtKill {
            throw Violation("foliod had exited by itself before the kill; its log ends:\n\(foliod.logTail())")
        }
        if let violation = (clients.flatMap(\.violations) + service.violations).first { throw violation }
        phases.end("workload")
        try journal(service)

        var answeredBackups: [(String, JSONObject)] = []
        var killedBackups: [String] = []
        for record in service.records {
            switch record.task {
            case .verify:
                if let result = record.result {
                    tally.verifiesDuringWorkload += 1
                    verifySeconds = record.seconds
                    guard result["ok"] == .bool(true), result["mismatches"] == .array([]) else {
                        throw Violation("verify during the workload reports \(JSON.object(result))")
                    }
                } else if record.problem == "no answer" {
                    tally.killedMidVerify += 1
                } else {
                    throw Violation("verify during the workload: \(record.problem ?? "")")
                }
            case .backup(let path):
                if let result = record.result {
                    backupSeconds = record.seconds
                    answeredBackups.append((path, result))
                } else if record.problem == "no answer" {
                    tally.killedMidBackup += 1
                    killedBackups.append(path)
                } else {
                    throw Violation("backup during the workload: \(record.problem ?? "")")
                }
            }
        }

        // Restart and check.
        try foliod.spawn()
        _ = try foliod.waitUntilServing(timeout: 60)
        phases.end("restart")
        let connection = try FolioConnection.forChecks(foliod.socketPath, timeout: 120)
        let figures = try RestartCheck(connection: connection, ledgers: ledgers, logged: logged).run()
        connection.close()
        tally.add(figures)
        verifySeconds = max(verifySeconds, figures.verifySeconds)
        noteLeftovers(&tally)
        for (path, result) in answeredBackups {
            try checkBackup(path, result)
            tally.backupsChecked += 1
        }
        for path in killedBackups where FileManager.default.fileExists(atPath: path + "/data.mdb") {
            try checkKilledBackup(path)
        }
        try? FileManager.default.removeItem(atPath: directory + "/backups")
        phases.end("checks")

        // Kill it idle, and rebuild a copy of its data directory offline: the same digest.
        try kill(&tally)
        try compareRebuild(figures)
        tally.rebuildsCompared += 1
        phases.end("rebuild")
    }

    /// SIGKILL, and with `--power-loss` the power loss that comes with it.
    private func kill(_ tally: inout Tally) throws(DriverError) {
        if let figures = try foliod.kill() { tally.powerLoss.add(figures) }
    }

    var keptFiles: String { "journal.jsonl, foliod.log, data/" + (options.powerLoss == nil ? "" : ", powerloss/") }

    /// With `--power-loss`, where the data directory's files come from, for a violation's message.
    var powerLossNote: String? {
        guard let powerLoss = foliod.powerLoss, let command = powerLoss.lastCommand else { return nil }
        return
            "the data directory's files are the image of the last power loss: `\(command)` (inputs in \(powerLoss.directory)/last), "
            + "which reported: \(powerLoss.lastSummary ?? "")"
    }

    /// The schemas with delete rules, before the store's first workload, as client 0's first writes:
    /// foliod is idle, so each must be acknowledged. One refused as not stored (its commit failed:
    /// `--power-loss-fail-writev`) changed nothing and is sent again, up to 20 times.
    private func defineSchemas() throws {
        try Self.defineSchemas(socketPath: foliod.socketPath, ledger: ledgers[0])
    }

    /// `defineSchemas()` through the foliod (or cluster node) at `socketPath`, into client 0's `ledger`.
    static func defineSchemas(socketPath: String, ledger: ClientLedger) throws {
        let connection = try FolioConnection.forChecks(socketPath, timeout: 120)
        defer { connection.close() }
        for schema in RuleSchemas.definitions {
            let operation = SchemaDefineOperation(schema: schema)
            var attempts = 0
            while true {
                let answer = try connection.rawCall(operation.request)
                let outcome = Outcome.answered(try JSONParser.parse(answer))
                let kind = try outcome.classify("\(operation.request)")
                attempts += 1
                if case .notStored = kind, attempts < 20 { continue }
                ledger.records.append(WriteRecord(client: 0, operation: operation, outcome: outcome))
                try operation.record(kind, in: ledger)
                break
            }
        }
    }

    /// Appends this cycle's requests and answers to journal.jsonl in the store's directory.
    private func journal(_ service: ServiceClient) throws {
        try Self.appendJournal(directory: directory, ledgers: ledgers, service: service.records)
    }

    static func appendJournal(directory: String, ledgers: [ClientLedger], service: [ServiceClient.Record]) throws {
        var text: [UInt8] = []
        for ledger in ledgers {
            for record in ledger.records {
                text += record.journalLine.serialized()
                text.append(0x0A)
            }
        }
        for record in service {
            let line: JSON = [
                "service": .string({ if case .verify = record.task { return "verify" } else { return "backup" } }()),
                "answer": record.result.map { .object($0) } ?? .string(record.problem ?? ""),
            ]
            text += line.serialized()
            text.append(0x0A)
        }
        let path = directory + "/journal.jsonl"
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil)
        }
        guard let handle = FileHandle(forWritingAtPath: path) else { throw DriverError("cannot write \(path)") }
        handle.seekToEndOfFile()
        handle.write(Data(text))
        handle.closeFile()
    }

    /// Whatever foliod left in its data directory besides its own files (a killed verify's scratch
    /// store, say): reported, and removed so that it is counted once.
    private func noteLeftovers(_ tally: inout Tally) {
        // The journal's files belong to a foliod run with --journal on (docs/DURABILITY.md).
        let expected: Set<String> = ["data.mdb", "lock.mdb", "foliod.lock", "journal", "checkpoint", "resume"]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: foliod.dataDirectory)) ?? []
        where !expected.contains(entry) {
            let path = foliod.dataDirectory + "/" + entry
            tally.leftovers.append(path)
            tally.leftoverBytes += Self.allocatedBytes(path)
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    /// The disk space a file or directory tree takes (its allocated blocks).
    private static func allocatedBytes(_ path: String) -> Int {
        var paths = [path]
        if let enumerator = FileManager.default.enumerator(atPath: path) {
            while let entry = enumerator.nextObject() as? String { paths.append(path + "/" + entry) }
        }
        return paths.reduce(0) { total, path in
            var status = stat()
            return total + (lstat(path, &status) == 0 ? Int(status.st_blocks) * 512 : 0)
        }
    }

    private func nextBackupDirectory() -> String {
        backupCounter += 1
        return directory + "/backups/b\(backupCounter)"
    }

    /// An answered backup must verify offline and have the digest and head it reported.
    private func checkBackup(_ path: String, _ result: JSONObject) throws {
        let run = try CommandRun.run(options.foliod, ["verify", "--data", path], timeout: 300)
        let lines = run.stdout.split(separator: "\n")
        guard run.status == 0, lines.contains(where: { $0 == "digest     \(result["digest"]?.stringValue ?? "?")" }),
            lines.contains(where: { $0 == "chain head \(result["chainHead"]?.stringValue ?? "?")" })
        else {
            throw Violation("the backup in \(path), answered \(JSON.object(result)), does not verify offline: \(run)")
        }
    }

    /// A backup killed before its answer may leave a `data.mdb` only once it is complete: it must
    /// verify (a truncated one made foliod die of SIGBUS).
    private func checkKilledBackup(_ path: String) throws {
        let run = try CommandRun.run(options.foliod, ["verify", "--data", path], timeout: 300)
        guard run.status == 0 else {
            throw Violation(
                "a backup killed before its answer left \(path)/data.mdb, on which foliod verify exits \(run.status): \(run.stderr.prefix(400))"
            )
        }
    }

    /// `foliod rebuild` on a copy of the data directory must derive the digest foliod reported.
    private func compareRebuild(_ figures: RestartCheck.Figures) throws {
        let copy = directory + "/rebuild"
        try? FileManager.default.removeItem(atPath: copy)
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        // With --journal on, data.mdb alone is the state of the last checkpoint at best: the journal
        // and the checkpoint file go with it.
        for file in ["data.mdb", "journal", "checkpoint"]
        where FileManager.default.fileExists(atPath: foliod.dataDirectory + "/" + file) {
            try FileManager.default.copyItem(atPath: foliod.dataDirectory + "/" + file, toPath: copy + "/" + file)
        }
        let run = try CommandRun.run(options.foliod, ["rebuild", "--data", copy], timeout: 300)
        let lines = run.stdout.split(separator: "\n")
        guard run.status == 0, lines.contains(where: { $0 == "digest     \(figures.digest)" }),
            lines.contains(where: { $0 == "chain head \(figures.chainHead)" })
        else {
            throw Violation(
                "foliod rebuild of a copy does not give foliod's digest \(figures.digest) and head \(figures.chainHead): \(run)"
            )
        }
    }

    private func sleep(seconds: Double) {
        if seconds > 0 { usleep(UInt32(seconds * 1_000_000)) }
    }
}
