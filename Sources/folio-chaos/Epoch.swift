import FolioClient
import FolioHarness
import FolioJSON
import Foundation
import Glibc

/// One data directory and the crash cycles run on it, all decided by one seed: the clients'
/// requests, the crash points and the delays.
final class Epoch {
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
        foliod = Foliod(binary: options.foliod, directory: directory, mapSize: options.mapSize)
        ledgers = (0..<options.clients).map { ClientLedger(client: $0) }
        random = SplitMix64(seed: seed)
    }

    /// Runs cycle `index` (0-based within this store); throws the first violation.
    func cycle(_ index: Int, _ tally: inout Tally) throws -> Void {
        defer { foliod.kill() }
        let point = CrashPoint.random(&random)
        tally.crashPoints[point, default: 0] += 1
        if point == .startup {
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let delay = Double.random(in: 0...(startupSeconds * 1.2), using: &random)
                try foliod.spawn()
                sleep(seconds: delay)
                foliod.kill()
                tally.startupKills += 1
            }
        }
        try foliod.spawn()
        startupSeconds = try foliod.waitUntilServing(timeout: 60)
        while foliod.mapGrowths.wait(timeout: .now()) == .success {}

        let killAt = Int.random(in: 20...options.workloadMilliseconds, using: &random)
        var tasks: [(afterMilliseconds: Int, task: ServiceClient.Task)] = []
        switch point {
        case .verify: tasks.append((Int.random(in: 0...(killAt / 2), using: &random), .verify))
        case .backup: tasks.append((Int.random(in: 0...(killAt / 2), using: &random), .backup(directory: nextBackupDirectory())))
        default:
            if Int.random(in: 0..<4, using: &random) == 0 { tasks.append((Int.random(in: 0...killAt, using: &random), .verify)) }
            if Int.random(in: 0..<4, using: &random) == 0 { tasks.append((Int.random(in: 0...killAt, using: &random), .backup(directory: nextBackupDirectory()))) }
        }
        let clients = ledgers.map { ledger in
            WorkloadClient(
                ledger: ledger, seed: seed &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(index) << 16 &+ UInt64(ledger.client), socketPath: foliod.socketPath,
                timeout: 30)
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
                let estimate = point == .verify ? verifySeconds : backupSeconds
                sleep(seconds: Double.random(in: 0...(estimate * 1.1), using: &random))
            }
        case .mapGrowth:
            if foliod.mapGrowths.wait(timeout: .now() + .milliseconds(max(killAt, 3_000))) == .success {
                tally.mapGrowthKills += 1
                sleep(seconds: Double.random(in: 0...0.002, using: &random))
            }
        case .staleReader:
            let first = Int.random(in: 10...max(10, killAt / 2), using: &random)
            sleep(seconds: Double(first) / 1000)
            if try StaleReader.leave(in: foliod.dataDirectory) { tally.staleReaders += 1 }
            sleep(seconds: Double(killAt - first) / 1000)
        }
        let aliveAtKill = foliod.isRunning
        foliod.kill()
        if finished.wait(timeout: .now() + 60) == .timedOut { throw Violation("clients still waiting 60 s after foliod was killed") }
        if !aliveAtKill { throw Violation("foliod had exited by itself before the kill; its log ends:\n\(foliod.logTail())") }
        if let violation = (clients.flatMap(\.violations) + service.violations).first { throw violation }
        try journal(service)

        var answeredBackups: [(String, JSONObject)] = []
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
                } else {
                    throw Violation("backup during the workload: \(record.problem ?? "")")
                }
            }
        }

        // Restart and check.
        try foliod.spawn()
        _ = try foliod.waitUntilServing(timeout: 60)
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
        try? FileManager.default.removeItem(atPath: directory + "/backups")

        // Kill it idle, and rebuild a copy of its data directory offline: the same digest.
        foliod.kill()
        try compareRebuild(figures)
        tally.rebuildsCompared += 1
    }

    /// Appends this cycle's requests and answers to journal.jsonl in the store's directory.
    private func journal(_ service: ServiceClient) throws {
        var text: [UInt8] = []
        for ledger in ledgers {
            for record in ledger.records {
                text += record.journalLine.serialized()
                text.append(0x0A)
            }
        }
        for record in service.records {
            let line: JSON = [
                "service": .string({ if case .verify = record.task { return "verify" } else { return "backup" } }()),
                "answer": record.result.map { .object($0) } ?? .string(record.problem ?? ""),
            ]
            text += line.serialized()
            text.append(0x0A)
        }
        let path = directory + "/journal.jsonl"
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        guard let handle = FileHandle(forWritingAtPath: path) else { throw DriverError("cannot write \(path)") }
        handle.seekToEndOfFile()
        handle.write(Data(text))
        handle.closeFile()
    }

    /// Whatever foliod left in its data directory besides its own files (a killed verify's scratch
    /// store, say): reported, and removed so that it is counted once.
    private func noteLeftovers(_ tally: inout Tally) {
        let expected: Set<String> = ["data.mdb", "lock.mdb", "foliod.lock"]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: foliod.dataDirectory)) ?? [] where !expected.contains(entry) {
            let path = foliod.dataDirectory + "/" + entry
            tally.leftovers.append(path)
            try? FileManager.default.removeItem(atPath: path)
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
        else { throw Violation("the backup in \(path), answered \(JSON.object(result)), does not verify offline: \(run)") }
    }

    /// `foliod rebuild` on a copy of the data directory must derive the digest foliod reported.
    private func compareRebuild(_ figures: RestartCheck.Figures) throws {
        let copy = directory + "/rebuild"
        try? FileManager.default.removeItem(atPath: copy)
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        try FileManager.default.copyItem(atPath: foliod.dataDirectory + "/data.mdb", toPath: copy + "/data.mdb")
        let run = try CommandRun.run(options.foliod, ["rebuild", "--data", copy], timeout: 300)
        let lines = run.stdout.split(separator: "\n")
        guard run.status == 0, lines.contains(where: { $0 == "digest     \(figures.digest)" }),
            lines.contains(where: { $0 == "chain head \(figures.chainHead)" })
        else { throw Violation("foliod rebuild of a copy does not give foliod's digest \(figures.digest) and head \(figures.chainHead): \(run)") }
    }

    private func sleep(seconds: Double) {
        if seconds > 0 { usleep(UInt32(seconds * 1_000_000)) }
    }
}
