import FolioCommandLine
import Foundation
import Glibc

/// `folio-bench storms`: hostile and extreme clients against a running foliod, each storm measured
/// before, during and after, printed as one table.
struct StormsCommand {
    static let usage = """
        usage: folio-bench storms --folio-socket PATH --folio-pid PID [--only STORM,...]
                                  [--idle N] [--idle-rounds N] [--slowloris N] [--long-lines N] [--churn N]
                                  [--abandon N]
                                  [--phase-seconds S] [--storm-seconds S] [--byte-interval S]
                                  [--line-timeout S] [--client-memory BYTES] [--keys N]
                                  [--timing judge|report] [--markdown FILE]

        Storms (bench/storms.sh, `make storms`, starts foliod and runs them all):
          idle      N connections (default 10000) held idle while 4 clients run 90% get / 10% create;
                    their p99 must stay within 2x of their p99 without them (--idle-rounds phases
                    with them, default 3, alternating with phases without)
          slow      N slowloris connections (default 500; one byte every --byte-interval s, default 1)
                    and N clients streaming lines of twice maxLine (default 100), for --storm-seconds
                    (default 30); foliod's memory must stay bounded and be given back
          watcher   watchers that never read (of new events, and from seq 0), while 16 clients update
                    durably; each must be cut off (lagging), the writers keep half their throughput
          churn     N connections opened and closed (default 100000); no descriptor or memory left
          abandon   N clients (default 20) each send 12 create lines just under maxLine and close at
                    once, again and again, for --storm-seconds; foliod's heap must stay within
                    --client-memory and some slack while it applies them (stops at 1 GiB over)
        Each measured phase (before, during, after) runs --phase-seconds (default 10). --line-timeout
        (default 60) and --client-memory (default 268435456) must be foliod's own, for the bounds.
        With --timing report, latency and throughput bounds are shown but do not fail the run (for a
        small run on a busy machine). Needs a descriptor limit above --idle (it raises its soft limit).

        Exit status: 0 when every bound held, 1 when one broke, 64 on a usage error.
        """

    static let storms = ["idle", "slow", "watcher", "churn", "abandon"]

    let socket: String
    let pid: Int32
    var only = Self.storms
    var idle = 10_000
    var idleRounds = 3
    var slowloris = 500
    var longLines = 100
    var churn = 100_000
    var abandoning = 20
    var phaseSeconds = 10.0
    var stormSeconds = 30.0
    var byteInterval = 1.0
    var lineTimeout = 60.0
    var clientMemory = 256 << 20
    var keyCount = 10_000
    var judgingTiming = true
    var markdownPath: String?

    init(_ argv: [String]) throws(UsageError) {
        var arguments = try Arguments(
            argv,
            valued: [
                "--folio-socket", "--folio-pid", "--only", "--idle", "--idle-rounds", "--slowloris", "--long-lines",
                "--churn", "--abandon",
                "--phase-seconds", "--storm-seconds", "--byte-interval", "--line-timeout", "--client-memory", "--keys",
                "--timing", "--markdown",
            ])
        guard let socket = arguments.value("--folio-socket") else { throw UsageError("give --folio-socket") }
        guard let pid = try arguments.integer("--folio-pid"), pid > 0, pid <= Int(Int32.max) else {
            throw UsageError("give --folio-pid: foliod's memory and descriptors are read from /proc")
        }
        self.socket = socket
        self.pid = Int32(pid)
        if let names = arguments.value("--only") {
            only = names.split(separator: ",").map(String.init)
            for name in only where !Self.storms.contains(name) {
                throw UsageError("unknown storm '\(name)'; known: \(Self.storms.joined(separator: ", "))")
            }
        }
        idle = try arguments.integer("--idle") ?? idle
        idleRounds = max(1, try arguments.integer("--idle-rounds") ?? idleRounds)
        slowloris = try arguments.integer("--slowloris") ?? slowloris
        longLines = try arguments.integer("--long-lines") ?? longLines
        churn = try arguments.integer("--churn") ?? churn
        abandoning = try arguments.integer("--abandon") ?? abandoning
        keyCount = max(1, try arguments.integer("--keys") ?? keyCount)
        clientMemory = try arguments.integer("--client-memory") ?? clientMemory
        phaseSeconds = try Self.seconds(arguments.value("--phase-seconds"), "--phase-seconds") ?? phaseSeconds
        stormSeconds = try Self.seconds(arguments.value("--storm-seconds"), "--storm-seconds") ?? stormSeconds
        byteInterval = try Self.seconds(arguments.value("--byte-interval"), "--byte-interval") ?? byteInterval
        lineTimeout = try Self.seconds(arguments.value("--line-timeout"), "--line-timeout") ?? lineTimeout
        switch arguments.value("--timing") {
        case nil, "judge": judgingTiming = true
        case "report": judgingTiming = false
        case let other?: throw UsageError("--timing is judge or report, not '\(other)'")
        }
        markdownPath = arguments.value("--markdown")
        try arguments.rejectUnused()
        if let extra = arguments.positionals.first { throw UsageError("unexpected argument '\(extra)'") }
    }

    private static func seconds(_ text: String?, _ name: String) throws(UsageError) -> Double? {
        guard let text else { return nil }
        guard let seconds = Double(text), seconds > 0, seconds.isFinite else {
            throw UsageError("\(name) needs a positive number of seconds, not '\(text)'")
        }
        return seconds
    }

    func run() throws -> Int32 {
        let limit = raiseDescriptorLimit()
        guard !only.contains("idle") || limit > idle + 256 else {
            throw BenchError.setup(
                "the descriptor limit is \(limit): too few for \(idle) idle connections (run `ulimit -n \(idle + 1024)` first)"
            )
        }
        let target = Target(kind: .folio, socketPath: socket, pid: pid)
        _ = try target.connectWhenReady(timeout: 10)
        let created = try KeyPreloader(target: target, keyCount: keyCount).preload()
        progress("keys k0..k\(keyCount - 1) " + (created ? "created" : "were there already"))
        let bench = try LoadContext(socket: socket, pid: pid, keyCount: keyCount, phaseSeconds: phaseSeconds)

        var figures: [StormFigure] = []
        for name in only {
            progress("storm \(name)…")
            let started = MonotonicClock.now()
            var rows: [StormFigure]
            do {
                switch name {
                case "idle": rows = try IdleConnectionsStorm(count: idle, rounds: idleRounds).run(bench)
                case "slow":
                    rows = try SlowClientsStorm(
                        slowloris: slowloris, longLines: longLines, seconds: stormSeconds,
                        byteIntervalSeconds: byteInterval, lineTimeoutSeconds: lineTimeout,
                        clientMemoryBytes: clientMemory
                    ).run(bench)
                case "watcher": rows = try StuckWatcherStorm().run(bench)
                case "churn": rows = try ConnectionChurnStorm(cycles: churn).run(bench)
                default:
                    rows = try AbandonedWritesStorm(
                        clients: abandoning, seconds: stormSeconds, clientMemoryBytes: clientMemory
                    ).run(bench)
                }
            } catch {
                // A storm that could not finish (foliod stalled, crashed or closed on a client) is a result too.
                rows = [StormFigure(name, "storm did not finish", check: "\(error)", holds: false)]
            }
            progress("storm \(name) took \(Report.seconds(LoadContext.seconds(started, MonotonicClock.now())))")
            for row in rows where row.verdict == .broken { progress("\(row.storm): \(row.measure): over its bound") }
            figures += rows
        }

        let table = StormFigure.table(figures, judgingTiming: judgingTiming)
        print(table.plain)
        if let markdownPath,
            !FileManager.default.createFile(atPath: markdownPath, contents: Data((table.markdown + "\n").utf8))
        {
            throw BenchError.setup("cannot write \(markdownPath)")
        }
        let failed = figures.filter { $0.fails(judgingTiming: judgingTiming) }
        for figure in failed {
            StandardError.write("folio-bench: FAILED: \(figure.storm), \(figure.measure): \(figure.check)")
        }
        return failed.isEmpty ? 0 : 1
    }

    /// Raises the soft descriptor limit to the hard one, as foliod does; the limit now.
    private func raiseDescriptorLimit() -> Int {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }

    private func progress(_ line: String) { StandardError.write("folio-bench: \(line)") }
}
