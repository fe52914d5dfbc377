import FolioCommandLine
import Foundation

/// What `folio-chaos` was asked to do, from its command line.
struct ChaosOptions {
    static let usage = """
        usage: folio-chaos [--cycles N] [--seed N] [--clients N] [--cycles-per-store N] [--workload-ms MS]
                           [--map-size BYTES] [--durability MODE] [--foliod PATH] [--directory DIR]
                           [--foliod-arg ARG ...] [--keep] [--verbose]
                           [--power-loss SHIM.so [--power-loss-image PATH] [--power-loss-unit BYTES]
                            [--power-loss-style STYLE] [--power-loss-names-need-dirsync]
                            [--power-loss-fail-writev N]]
                           [--lose-writes | --split-batches | --double-apply-retries]
                           [--cluster N]

        The crash loop: starts foliod on a data directory, runs a mixed workload from many clients,
        kills foliod with SIGKILL at a random moment (also during start-up, during verify or backup,
        while the LMDB map grows, after a reader process was killed mid-read), restarts it and checks
        the store against the history of requests and answers. Every --cycles-per-store cycles it
        starts again on a fresh data directory.

          --cycles N             crash cycles to run (default 20)
          --seed N               seed of the first store; store k uses N + k (default: from the clock)
          --clients N            writing clients (default 8)
          --cycles-per-store N   cycles on one data directory before a fresh one (default 10)
          --workload-ms MS       longest workload before a kill (default 800)
          --map-size BYTES       foliod --map-size (default 1048576, so the map grows often)
          --durability MODE      foliod --durability: full (default), relaxed or none; a kill of
                                 foliod alone must lose no acknowledged write in any of them
          --foliod PATH          the foliod binary (default: foliod next to this program)
          --foliod-arg ARG       one more argument for foliod (repeatable: --foliod-arg --journal
                                 --foliod-arg on)
          --directory DIR        where stores are made (default: a new directory under $TMPDIR)
          --keep                 keep every store's directory, not only those with a violation
          --verbose              one line per cycle
          --power-loss SHIM.so   every kill is also a power loss (docs/POWERLOSS.md): foliod runs under
                                 the LD_PRELOAD library built from Tests/Faults/powerloss.c, which logs
                                 its writes and flushes of the data directory's files; after each kill
                                 those files are replaced by what a disk could hold: what was flushed,
                                 and of each page written since, any one of its versions
          --power-loss-image PATH  the program built from Tests/Faults/powerloss_image.c that makes
                                 the image (default: powerloss_image next to SHIM.so)
          --power-loss-unit BYTES  what the disk writes whole: 4096 (default), or 512 to tear pages
          --power-loss-style STYLE  how pages not flushed are chosen: mixed (default: one of the others
                                 per power loss), uniform (any version of each page), synced (none of
                                 them), coin (each page none or its last), latest (all: a plain kill)
          --power-loss-names-need-dirsync  a file created, renamed or removed survives only once an
                                 fsync of its directory covered it (default: at once)
          --power-loss-fail-writev N  fault injection: about one in N of LMDB's writes of a commit's
                                 pages by foliod's writer thread fails with ENOSPC, so that commits
                                 fail after the journal got their record and must be cancelled
          --lose-writes          fault injection, to test the checks: from a store's second cycle on,
                                 put back after the kill the data.mdb (and journal) of before the
                                 workload, so that acknowledged writes are lost and must be reported
          --split-batches        fault injection: send atomic batches without a key as two, as if
                                 foliod applied a batch in two parts, which must be reported
          --double-apply-retries fault injection: send replays without their key, so that foliod writes
                                 them again, and take the first answer as theirs: the second writes
                                 must be reported
          --cluster N            N foliod nodes on one PostgreSQL log (docs/CLUSTER.md), started by
                                 the loop in a temporary directory, a database of its own for each
                                 store; client k writes through node k mod N. Each cycle's crash is
                                 one node killed, every node killed, or PostgreSQL stopped with -m
                                 immediate (its unflushed WAL lost) and started again while the nodes
                                 serve; then every node must catch up with the log, hold PostgreSQL's
                                 chain head and the same digest, and verify, and the history is
                                 checked on node 1. No verify, backup, map-growth, stale-reader or
                                 rebuild crash points (offline tools are not for a node's copy)

        A violation names the seed and cycle count that rerun its store: `--seed S --cycles C` with
        the same --clients and --cycles-per-store replays the same requests, crash points and delays
        (thread timing is the machine's). Exit status: 0 if no violation, 1 if any, 64 on a usage error.
        """

    var cycles = 20
    var seed = UInt64(Date().timeIntervalSince1970 * 1000) % 1_000_000_007
    var clients = 8
    var cyclesPerStore = 10
    var workloadMilliseconds = 800
    var mapSize = 1 << 20
    var durability = "full"
    var foliod = ChaosOptions.siblingFoliod
    var directory: String?
    var keep = false
    var verbose = false
    var loseWrites = false
    var faults = WorkloadClient.Faults()
    var foliodArguments: [String] = []
    var powerLoss: PowerLoss.Options?
    /// Nodes of a cluster on PostgreSQL; 0 for a single foliod.
    var clusterNodes = 0
    var showHelp = false

    init(_ argv: [String]) throws(UsageError) {
        var arguments = try Arguments(
            argv,
            valued: [
                "--cycles", "--seed", "--clients", "--cycles-per-store", "--workload-ms", "--map-size", "--durability",
                "--foliod", "--directory", "--foliod-arg", "--power-loss", "--power-loss-image", "--power-loss-unit",
                "--power-loss-style", "--power-loss-fail-writev", "--cluster",
            ])
        if try arguments.flag("--help", "-h") {
            showHelp = true
            return
        }
        if let value = try arguments.integer("--cycles") { cycles = value }
        if let value = try arguments.integer("--seed") { seed = UInt64(value) }
        if let value = try arguments.integer("--clients") {
            guard (1...64).contains(value) else { throw UsageError("--clients must be 1 to 64") }
            clients = value
        }
        if let value = try arguments.integer("--cycles-per-store") {
            guard value >= 1 else { throw UsageError("--cycles-per-store must be at least 1") }
            cyclesPerStore = value
        }
        if let value = try arguments.integer("--workload-ms") {
            guard value >= 20 else { throw UsageError("--workload-ms must be at least 20") }
            workloadMilliseconds = value
        }
        if let value = try arguments.integer("--map-size") { mapSize = value }
        if let value = arguments.value("--durability") {
            guard ["full", "relaxed", "none"].contains(value) else {
                throw UsageError("--durability must be full, relaxed or none")
            }
            durability = value
        }
        if let value = arguments.value("--foliod") { foliod = value }
        directory = arguments.value("--directory")
        keep = try arguments.flag("--keep")
        verbose = try arguments.flag("--verbose", "-v")
        loseWrites = try arguments.flag("--lose-writes")
        faults.splitBatches = try arguments.flag("--split-batches")
        faults.doubleApplyRetries = try arguments.flag("--double-apply-retries")
        foliodArguments = arguments.values("--foliod-arg")
        powerLoss = try Self.powerLoss(&arguments)
        if powerLoss != nil && loseWrites {
            throw UsageError("--power-loss and --lose-writes both replace data.mdb after a kill: give one")
        }
        if let value = try arguments.integer("--cluster") {
            guard (1...8).contains(value) else { throw UsageError("--cluster must be 1 to 8 nodes") }
            clusterNodes = value
        }
        if clusterNodes > 0 && (powerLoss != nil || loseWrites) {
            throw UsageError("--cluster kills nodes and stops PostgreSQL: it takes no --power-loss or --lose-writes")
        }
        try arguments.rejectUnused()
        if let extra = arguments.positionals.first { throw UsageError("unexpected argument '\(extra)'") }
    }

    /// `--power-loss SHIM.so` and the options that go with it.
    private static func powerLoss(_ arguments: inout Arguments) throws(UsageError) -> PowerLoss.Options? {
        let image = arguments.value("--power-loss-image")
        let unit = try arguments.integer("--power-loss-unit")
        let style = arguments.value("--power-loss-style")
        let namesNeedDirectorySync = try arguments.flag("--power-loss-names-need-dirsync")
        let failWritev = try arguments.integer("--power-loss-fail-writev")
        guard let shim = arguments.value("--power-loss") else {
            guard image == nil && unit == nil && style == nil && !namesNeedDirectorySync && failWritev == nil else {
                throw UsageError(
                    "--power-loss-image, --power-loss-unit, --power-loss-style, --power-loss-names-need-dirsync and "
                        + "--power-loss-fail-writev need --power-loss")
            }
            return nil
        }
        let shimPath = URL(fileURLWithPath: shim).standardizedFileURL.path
        let sibling = URL(fileURLWithPath: shimPath).deletingLastPathComponent().appendingPathComponent(
            "powerloss_image"
        ).path
        var options = PowerLoss.Options(shim: shimPath, imageTool: image ?? sibling)
        if let unit {
            guard [512, 1024, 2048, 4096].contains(unit) else {
                throw UsageError("--power-loss-unit must be 512, 1024, 2048 or 4096")
            }
            options.unit = unit
        }
        if let style {
            guard PowerLoss.styles.contains(style) else {
                throw UsageError("--power-loss-style must be one of \(PowerLoss.styles.joined(separator: ", "))")
            }
            options.style = style
        }
        options.namesNeedDirectorySync = namesNeedDirectorySync
        if let failWritev {
            guard failWritev >= 2 else { throw UsageError("--power-loss-fail-writev must be 2 or more") }
            options.failWritev = failWritev
        }
        return options
    }

    /// The options that rerun store `seed` for `cycles` cycles (thread timing is the machine's).
    func rerun(seed: UInt64, cycles: Int) -> String {
        var words = [
            "folio-chaos", "--seed", "\(seed)", "--cycles", "\(cycles)", "--clients", "\(clients)",
            "--cycles-per-store",
            "\(cyclesPerStore)", "--workload-ms", "\(workloadMilliseconds)", "--map-size", "\(mapSize)", "--durability",
            durability,
        ]
        for argument in foliodArguments { words += ["--foliod-arg", argument] }
        if clusterNodes > 0 { words += ["--cluster", "\(clusterNodes)"] }
        if let powerLoss {
            words += [
                "--power-loss", powerLoss.shim, "--power-loss-image", powerLoss.imageTool,
                "--power-loss-unit", "\(powerLoss.unit)", "--power-loss-style", powerLoss.style,
            ]
            if powerLoss.namesNeedDirectorySync { words.append("--power-loss-names-need-dirsync") }
            if let every = powerLoss.failWritev { words += ["--power-loss-fail-writev", "\(every)"] }
        }
        return words.joined(separator: " ")
    }

    /// `foliod` in the directory of this executable, where SwiftPM puts both.
    private static var siblingFoliod: String {
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: executable).deletingLastPathComponent().appendingPathComponent("foliod").path
    }
}
