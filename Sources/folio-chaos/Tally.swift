/// What a run counted, over all its stores.
struct Tally {
    var cycles = 0
    var stores = 0
    var writes = 0
    var acknowledged = 0
    var refused = 0
    var uncertain = 0
    var uncertainApplied = 0
    var events = 0
    var consequences = 0
    var keyed = 0
    var countersChecked = 0
    /// Writes of each kind: [sent, acknowledged, refused, unknown, unknown and found applied].
    var kinds: [String: [Int]] = [:]
    var crashPoints: [CrashPoint: Int] = [:]
    var startupKills = 0
    /// Kills during verify or backup that landed before the answer.
    var killedMidVerify = 0
    var killedMidBackup = 0
    var mapGrowthKills = 0
    var staleReaders = 0
    var backupsChecked = 0
    var verifiesDuringWorkload = 0
    var rebuildsCompared = 0
    /// Entries other than foliod's own files found in a data directory after a restart.
    var leftovers: [String] = []
    var leftoverBytes = 0
    var violations: [String] = []
    /// With `--cluster`: what the cycles crashed, and the nodes compared with node 1.
    var cluster = ClusterFigures()
    /// With `--power-loss`: what the power losses put back.
    var powerLoss = PowerLoss.Figures()
    /// Seconds spent in each phase of the cycles, in the order phases first ended.
    var phases: [(name: String, seconds: Double)] = []

    mutating func add(_ clock: PhaseClock) {
        for (name, seconds) in clock.phases {
            if let index = phases.firstIndex(where: { $0.name == name }) {
                phases[index].seconds += seconds
            } else {
                phases.append((name, seconds))
            }
        }
    }

    mutating func add(_ figures: RestartCheck.Figures) {
        writes += figures.writes
        acknowledged += figures.acknowledged
        refused += figures.refused
        uncertain += figures.uncertain
        uncertainApplied += figures.uncertainApplied
        events += figures.events
        consequences += figures.consequences
        keyed += figures.keyed
        countersChecked += figures.countersChecked
        for (kind, counts) in figures.kinds {
            kinds[kind] = zip(kinds[kind] ?? [0, 0, 0, 0, 0], counts).map { $0 + $1 }
        }
    }

    private var kindSummary: String {
        kinds.sorted { $0.value[0] > $1.value[0] }.map { kind, counts in
            "\(kind) \(counts[0]): \(counts[1])/\(counts[2])/\(counts[3])" + (counts[3] > 0 ? ", \(counts[4])" : "")
        }.joined(separator: "; ")
    }

    /// What only a single foliod's cycles do (a cluster's have none of these crash points).
    private var singleFoliodSummary: String {
        """
        start-up kills \(startupKills), kills with verify unanswered \(killedMidVerify), with backup unanswered \
        \(killedMidBackup), right after map growth \(mapGrowthKills), stale reader slots left \(staleReaders)
        backups verified offline \(backupsChecked), verifies during workloads \(verifiesDuringWorkload), \
        rebuild digests compared \(rebuildsCompared), \
        entries left in data directories \(leftovers.count) (\(leftoverBytes / 1024) KiB)

        """
    }

    var summary: String {
        let points =
            cluster.crashes > 0
            ? cluster.summary : CrashPoint.allCases.map { "\($0.name) \(crashPoints[$0] ?? 0)" }.joined(separator: ", ")
        return """
            cycles \(cycles) (\(stores) stores), writes checked \(writes): \(acknowledged) acknowledged, \(refused) refused, \
            \(uncertain) unknown outcomes (\(uncertainApplied) found applied, \(uncertain - uncertainApplied) not)
            events checked \(events) (made by delete rules \(consequences)); writes with a request key \(keyed); \
            counter values checked \(countersChecked); crash points: \(points)
            by kind (sent: acknowledged/refused/unknown, found applied): \(kindSummary)
            \(cluster.crashes > 0 ? "" : singleFoliodSummary)time by phase: \(phases.map { "\($0.name) \(Int($0.seconds.rounded())) s" }.joined(separator: ", "))
            """ + (powerLoss.strikes > 0 ? "\n" + powerLoss.summary : "") + "\nviolations \(violations.count)"
    }
}

/// The crash loop's cluster figures (`ClusterEpoch`).
struct ClusterFigures {
    var nodeKills = 0
    var allNodeKills = 0
    var postgresStops = 0
    /// Nodes killed while they started (caught up), before a cycle's start.
    var startupKills = 0
    /// Killed nodes started again from an empty data directory.
    var rejoins = 0
    /// Retries of keyed writes sent through another node than the first attempt.
    var crossNodeRetries = 0
    /// Nodes other than node 1 found with its digest and chain head, and verified.
    var nodesCompared = 0
    /// The longest a node held the log's head but did not yet follow it (PostgreSQL just back).
    var longestFollowWait = 0.0

    var crashes: Int { nodeKills + allNodeKills + postgresStops }

    var summary: String {
        "one node killed \(nodeKills), every node killed \(allNodeKills), PostgreSQL stopped immediately \(postgresStops); "
            + "nodes killed while starting \(startupKills), started again from an empty data directory \(rejoins); retries through another node \(crossNodeRetries); nodes compared with node 1 and verified \(nodesCompared); "
            + "longest wait at the head for a node to follow the log again \(String(format: "%.2f", longestFollowWait)) s"
    }
}
