import FolioCommandLine

/// What `folio-bench` was asked to do, from its command line.
struct BenchOptions {
    static let usage = """
        usage: folio-bench [--folio-socket PATH[,PATH...]] [--folio-pid PID[,PID...]] [--folio-name NAME]
                           [--redis-socket PATH] [--redis-pid PID]
                           [--sqlite-database FILE] [--sqlite-normal-database FILE]
                           [--baseline-socket PATH[,PATH...] [--baseline-pid PID[,PID...]] [--baseline-name NAME]]
                           [--duration SECONDS] [--warmup SECONDS] [--rounds N] [--keys N]
                           [--only ID,ID...] [--markdown FILE] [--connect-timeout SECONDS] [--sync-probe DIR]

        Runs the same closed-loop load against foliod (JSON lines) and redis-server (RESP), each on a
        Unix socket, and SQLite in this process, scenario by scenario, alternating between them, and
        prints one table. Give at least one socket or database; with a pid, the daemon's VmRSS and VmHWM
        are sampled from /proc. bench/run.sh (`make bench`) starts both daemons and runs this.

        A baseline is a second foliod, e.g. one built from an earlier commit, run alternately with the
        first in the same way, so that the ratios say what changed (bench/relations.sh does this).

        Several sockets, comma-separated, are the nodes of one cluster (docs/CLUSTER.md): the scenario's
        clients connect to them in turn, keys are created through the first and read once every node
        has them, and the CPU time is that of every pid given (the nodes and PostgreSQL's processes);
        memory is the first pid's. bench/cluster.sh (`make bench-cluster`) runs it so.

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
          --folio-name NAME     what the tables call the first foliod (default "Folio")
          --only IDS            scenarios to run, by id (default: all of \(Scenario.standard.map(\.id).joined(separator: ", "));
                                also \(Scenario.extra.map(\.id).joined(separator: ", "))
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
          folio-bench fill ...      events through atomic batches of creates, on one node or several (bench/cluster.sh)
          folio-bench apply-lag ... from a write's answer on one cluster node to its event on the others (bench/cluster.sh)
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
                "--folio-socket", "--folio-pid", "--folio-name", "--redis-socket", "--redis-pid", "--sqlite-database",
                "--sqlite-normal-database", "--baseline-socket", "--baseline-pid",
                "--baseline-name", "--duration", "--warmup", "--rounds", "--keys",
                "--only", "--markdown", "--connect-timeout", "--sync-probe",
            ])
        if try arguments.flag("--help", "-h") {
            showHelp = true
            return
        }
        if let paths = arguments.value("--folio-socket") {
            targets.append(
                Target(
                    kind: .folio, socketPaths: try Self.paths(paths, "--folio-socket"),
                    pids: try Self.pids(arguments.value("--folio-pid")),
                    name: arguments.value("--folio-name")))
        }
        if let paths = arguments.value("--baseline-socket") {
            targets.append(
                Target(
                    kind: .folio, socketPaths: try Self.paths(paths, "--baseline-socket"),
                    pids: try Self.pids(arguments.value("--baseline-pid")),
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
            let known = Scenario.standard + Scenario.extra
            for id in ids where !known.contains(where: { $0.id == id }) {
                throw UsageError("unknown scenario '\(id)'; known: \(known.map(\.id).joined(separator: ", "))")
            }
            scenarios = known.filter { ids.contains($0.id) }
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

    /// `PID[,PID...]`; none when not given.
    private static func pids(_ text: String?) throws(UsageError) -> [Int32] {
        guard let text else { return [] }
        var pids: [Int32] = []
        for field in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard let value = Int(field), let pid = try pid(value) else {
                throw UsageError("a pid must be a positive process id, not '\(field)'")
            }
            pids.append(pid)
        }
        return pids
    }

    /// `PATH[,PATH...]`: the nodes of one cluster.
    private static func paths(_ text: String, _ name: String) throws(UsageError) -> [String] {
        let paths = text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard !paths.contains(where: \.isEmpty) else {
            throw UsageError("\(name) needs socket paths separated by commas, not '\(text)'")
        }
        return paths
    }

    private static func seconds(_ text: String?, _ name: String) throws(UsageError) -> Double? {
        guard let text else { return nil }
        guard let seconds = Double(text), seconds >= 0, seconds.isFinite else {
            throw UsageError("\(name) needs a number of seconds, not '\(text)'")
        }
        return seconds
    }
}
