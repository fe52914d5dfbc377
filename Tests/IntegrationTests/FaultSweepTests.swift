import FolioJSON
import Foundation
import Testing

private let faultSweepCalls = Int(ProcessInfo.processInfo.environment["FOLIO_FAULT_SWEEP"] ?? "") ?? 0

/// The long runs behind `make faults` (skipped unless `FOLIO_FAULT_SWEEP` gives a count K): each
/// I/O fault of `IOFaultTests`, armed before foliod starts, on the 1st, 2nd, … K-th call of its
/// kind (start-up included), and each crash failpoint on passes 1 … K in every durability mode.
/// Every run must end in one of the outcomes the protocol allows, and a foliod started again must
/// hold what was promised (`WriteLoad.check`). Prints a table of the outcomes.
@Suite(.enabled(if: faultSweepCalls > 0, "set FOLIO_FAULT_SWEEP=K (make faults)"), .serialized)
struct FaultSweepTests {
    static let calls = faultSweepCalls

    /// How one run ended.
    enum Outcome: String, CaseIterable {
        /// foliod refused to start, saying why.
        case refusedToStart = "refused to start"
        /// Writes failed, then resumed once the fault cleared, without a restart.
        case resumed = "writes resumed"
        /// foliod stopped with EX_IOERR.
        case stopped = "stopped (74)"
        /// foliod crashed at the failpoint.
        case crashed = "crashed (86)"
        /// The fault was never reached: the sweep of this kind is over.
        case notReached = "not reached"
    }

    struct IOKind: CustomStringConvertible {
        let calls: String
        let error: String
        let sticky: Bool
        /// Path under the data directory ("" for all of it).
        let file: String
        let durability: String
        var description: String {
            "\(calls) \(error) \(sticky ? "sticky" : "once") data/\(file) --durability \(durability)"
        }
    }

    static let ioKinds = [
        IOKind(calls: "write", error: "ENOSPC", sticky: true, file: "", durability: "full"),
        IOKind(calls: "write", error: "EIO", sticky: false, file: "data.mdb", durability: "full"),
        IOKind(calls: "sync", error: "EIO", sticky: false, file: "data.mdb", durability: "full"),
        IOKind(calls: "sync", error: "EIO", sticky: false, file: "data.mdb", durability: "relaxed"),
        IOKind(calls: "write", error: "EIO", sticky: true, file: "data.mdb", durability: "none"),
        IOKind(calls: "open", error: "EIO", sticky: false, file: "", durability: "full"),
    ]

    @Test func everyNthIOCallFails() throws {
        var table: [String] = []
        for kind in Self.ioKinds {
            var outcomes: [Outcome: Int] = [:]
            for nth in 1...Self.calls {
                let outcome = try run(kind, nth: nth)
                outcomes[outcome, default: 0] += 1
                if outcome == .notReached { break }
            }
            table.append(Self.row("\(kind)", outcomes))
        }
        print(Self.header + table.joined(separator: "\n"))
    }

    @Test func everyCrashPointAtEveryPass() throws {
        let points = [
            "writer.beforeCommit", "writer.afterJournal", "writer.midBatch", "store.afterLogAppend",
            "writer.afterCommit", "confirm.beforeSync",
            "confirm.afterSync",
        ]
        var table: [String] = []
        for durability in ["full", "relaxed", "none"] {
            for point in points
            where durability == "full" || !(point.hasPrefix("confirm.") || point == "writer.afterJournal") {
                var outcomes: [Outcome: Int] = [:]
                for pass in 1...Self.calls {
                    try withFaultyDaemon(arguments: ["--durability", durability], failpoints: "\(point)=crash@\(pass)")
                    { daemon in
                        let load = WriteLoad(clients: 3)
                        load.start(socket: daemon.socketPath)
                        load.wait(timeout: 60) { !$0.isRunning }
                        let status = daemon.waitForExit(timeout: 20)
                        #expect(status == FailpointTests.crashStatus, "\(point)@\(pass) \(durability): \(daemon.log)")
                        outcomes[.crashed, default: 0] += 1
                        try expectRecovered(daemon, load)
                    }
                }
                table.append(Self.row("\(point) --durability \(durability)", outcomes))
            }
        }
        print(Self.header + table.joined(separator: "\n"))
    }

    /// One run: the fault armed from the start on the `nth` call; a load of two clients until 150
    /// writes are acknowledged, 30 refused, or foliod stops; the fault cleared; then the outcome's
    /// checks.
    private func run(_ kind: IOKind, nth: Int) throws -> Outcome {
        var outcome = Outcome.notReached
        try withShimmedDaemon(arguments: ["--durability", kind.durability], start: false) { daemon, shim in
            let path = daemon.dataDirectory + (kind.file.isEmpty ? "" : "/" + kind.file)
            try shim.set(.init(calls: kind.calls, nth: nth, error: kind.error, sticky: kind.sticky, path: path))
            let load = WriteLoad(clients: 2)
            do {
                try daemon.start()
            } catch {
                #expect(daemon.log.contains("cannot start:"), "\(kind) #\(nth): \(daemon.log)")
                outcome = .refusedToStart
                try shim.clear()
                try expectRecovered(daemon, load)
                return
            }
            load.start(socket: daemon.socketPath)
            load.wait { $0.acknowledged >= 150 || $0.refused >= 30 }
            try shim.clear()
            let acknowledgedAtClear = load.acknowledged
            if load.isRunning {
                // Still serving: writes must go through again, or foliod is on its way out.
                load.wait(timeout: 15) { $0.acknowledged >= acknowledgedAtClear + 20 || !daemon.isRunning }
            }
            load.stop()
            let injected = !shim.injected.isEmpty
            if let status = daemon.waitForExit(timeout: daemon.isRunning ? 0 : 20) {
                #expect(status == FailpointTests.ioErrorStatus, "\(kind) #\(nth): exit \(status)\n\(daemon.log)")
                outcome = .stopped
            } else {
                let status = try daemon.stop()
                #expect(status == 0 || status == FailpointTests.ioErrorStatus, "\(kind) #\(nth): \(daemon.log)")
                outcome = status == 0 ? (injected ? .resumed : .notReached) : .stopped
            }
            if outcome == .resumed {
                #expect(load.acknowledged >= acknowledgedAtClear + 20, "\(kind) #\(nth): writes did not resume")
            }
            try expectRecovered(daemon, load)
        }
        return outcome
    }

    private static let header =
        "\n" + ["fault", "runs"].joined(separator: " | ") + " | "
        + Outcome.allCases.map(\.rawValue).joined(separator: " | ") + "\n"

    private static func row(_ name: String, _ outcomes: [Outcome: Int]) -> String {
        "\(name) | \(outcomes.values.reduce(0, +)) | "
            + Outcome.allCases.map { String(outcomes[$0, default: 0]) }.joined(separator: " | ")
    }
}
