import FolioCommandLine

/// What `folio-bench` was asked to do, from its command line.
struct BenchOptions {
    static let usage = """
        usage: folio-bench [--folio-socket PATH] [--folio-pid PID] [--redis-socket PATH] [--redis-pid PID]
                           [--sqlite-database FILE] [--sqlite-normal-database FILE]
                           [--baseline-socket PATH [--baseline-pid PID] [--baseline-name NAME]]
                           [--duration SECONDS] [--warmup SECONDS] [--rounds N] [--keys N]
                           [--only ID,ID...] [--markdown FILE] [--connect-timeout SECONDS] [--sync-probe DIR]

        Runs the same closed-loop load against foliod (JSON lines) and redis-server (RESP), each on a
        Unix socket, and SQLite in this process, scenario by scenario, alternating between them, and
        prints one table. Give at least one socket or database; with a pid, the daemon's VmRSS and VmHWM
        are sampled from /proc. bench/run.sh (`make bench`) starts both daemons and runs this.

        A baseline is a second foliod, e.g. one built from an earlier commit, run alternately with the
        first in the same way, so that the ratios say what changed (bench/relations.sh does this).

          --sqlite-database F   SQLite in WAL mode with synchronous=FULL on the database file F (created
                                if missing), one connection per client
          --sqlite-normal-database F
                                the same with synchronous=NORMAL, on another file
          --duration SECONDS    measured time per scenario, per daemon, per round (default 5)
          --warmup SECONDS      unmeasured load before each measurement (default 1)
          --rounds N            runs per scenario and daemon, alternating who goes first (default 1)
          --keys N              keys k0..kN-1 created before the get scenarios (default 10000)
          --baseline-socket P   a second foliod to compare the first with (named --baseline-name, default
                                "Folio before"; --baseline-pid for its memory and CPU)
          --only IDS            scenarios to run, by id (default: all): \(Scenario.standard.map(\.id).joined(separator: ", "))
          --markdown FILE       also write the tables as Markdown to FILE
          --connect-timeout S   how long to wait for a daemon's socket to answer (default 10)
          --sync-probe DIR      before and after the scenarios, time 4 KiB appends + fdatasync in DIR (on
                                the daemons' disk), so durable-write figures come with the disk's own
                                sync latency

        Exit status: 0 when every request succeeded, 1 when any failed, 64 on a usage error.

        Other measurements (each prints its own usage with --help):
          folio-bench views ...     materialized views beside a Redis sorted set (bench/views.sh)
          folio-bench relations ... backlinks, view ranges, batches, cascades (bench/relations.sh)
          folio-bench watch ...     watch delivery latency under a steady write load (bench/replay.sh)
          folio-bench populate ...  fill a foliod with events for the replay benchmark (bench/replay.sh)
          folio-bench storms ...    idle, slow, oversized, stuck and churning clients (bench/storms.sh)
          folio-bench soak ...      a long mixed load at half the maximum, foliod sampled (bench/soak.sh)
        """

    var targets: [Target] = []
    var timing = ScenarioRunner.Timing(warmupSeconds: 1, durationSeconds: 5)
    var rounds = 1
    var keyCount = 10_000
    var scenarios = Scenario.standard
    var markdownPath: String?
    var connectTimeout = 10.0
    var syncProbeDirectory: String?
    var showHelp = false

    init(_ argv: [String]) throws(UsageError) {
        var arguments = try Arguments(
            argv,
            valued: [
                "--folio-socket", "--folio-pid", "--redis-socket", "--redis-pid", "--sqlite-database",
                "--sqlite-normal-database", "--baseline-socket", "--baseline-pid",
                "--baseline-name", "--duration", "--warmup", "--rounds", "--keys",
                "--only", "--markdown", "--connect-timeout", "--sync-probe",
            ])
        if try arguments.flag("--help", "-h") {
            showHelp = true
            return
        }
        if let path = arguments.value("--folio-socket") {
            targets.append(Target(kind: .folio, socketPath: path, pid: try Self.pid(arguments.integer("--folio-pid"))))
        }
        if let path = arguments.value("--baseline-socket") {
            targets.append(
                Target(
                    kind: .folio, socketPath: path, pid: try Self.pid(arguments.integer("--baseline-pid")),
                    name: arguments.value("--baseline-name") ?? "Folio before"))
        }
        if let path = arguments.value("--redis-socket") {
            targets.append(Target(kind: .redis, socketPath: path, pid: try Self.pid(arguments.integer("--redis-pid"))))
        }
        if let path = arguments.value("--sqlite-database") {
            targets.append(Target(kind: .sqlite, socketPath: path, pid: nil))
        }
        if let path = arguments.value("--sqlite-normal-database") {
            targets.append(Target(kind: .sqliteNormal, socketPath: path, pid: nil))
        }
        guard !targets.isEmpty else {
            throw UsageError("give at least one of --folio-socket, --redis-socket, --sqlite-database")
        }
        timing.durationSeconds = try Self.seconds(arguments.value("--duration"), "--duration") ?? timing.durationSeconds
        timing.warmupSeconds = try Self.seconds(arguments.value("--warmup"), "--warmup") ?? timing.warmupSeconds
        connectTimeout = try Self.seconds(arguments.value("--connect-timeout"), "--connect-timeout") ?? connectTimeout
        rounds = try arguments.integer("--rounds") ?? rounds
        keyCount = try arguments.integer("--keys") ?? keyCount
        guard rounds >= 1 else { throw UsageError("--rounds must be at least 1") }
        guard keyCount >= 1 else { throw UsageError("--keys must be at least 1") }
        if let only = arguments.value("--only") {
            let ids = only.split(separator: ",").map(String.init)
            for id in ids where !Scenario.standard.contains(where: { $0.id == id }) {
                throw UsageError(
                    "unknown scenario '\(id)'; known: \(Scenario.standard.map(\.id).joined(separator: ", "))")
            }
            scenarios = Scenario.standard.filter { ids.contains($0.id) }
        }
        markdownPath = arguments.value("--markdown")
        syncProbeDirectory = arguments.value("--sync-probe")
        try arguments.rejectUnused()
        if let extra = arguments.positionals.first { throw UsageError("unexpected argument '\(extra)'") }
    }

    private static func pid(_ value: Int?) throws(UsageError) -> Int32? {
        guard let value else { return nil }
        guard value > 0 && value <= Int(Int32.max) else {
            throw UsageError("a pid must be a positive process id, not \(value)")
        }
        return Int32(value)
    }

    private static func seconds(_ text: String?, _ name: String) throws(UsageError) -> Double? {
        guard let text else { return nil }
        guard let seconds = Double(text), seconds >= 0, seconds.isFinite else {
            throw UsageError("\(name) needs a number of seconds, not '\(text)'")
        }
        return seconds
    }
}
