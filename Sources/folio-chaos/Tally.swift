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
    var violations: [String] = []

    mutating func add(_ figures: RestartCheck.Figures) {
        writes += figures.writes
        acknowledged += figures.acknowledged
        refused += figures.refused
        uncertain += figures.uncertain
        uncertainApplied += figures.uncertainApplied
        events += figures.events
    }

    var summary: String {
        let points = CrashPoint.allCases.map { "\($0.name) \(crashPoints[$0] ?? 0)" }.joined(separator: ", ")
        return """
            cycles \(cycles) (\(stores) stores), writes checked \(writes): \(acknowledged) acknowledged, \(refused) refused, \
            \(uncertain) unknown outcomes (\(uncertainApplied) found applied, \(uncertain - uncertainApplied) not)
            events checked \(events); crash points: \(points)
            start-up kills \(startupKills), kills with verify unanswered \(killedMidVerify), with backup unanswered \
            \(killedMidBackup), right after map growth \(mapGrowthKills), stale reader slots left \(staleReaders)
            backups verified offline \(backupsChecked), verifies during workloads \(verifiesDuringWorkload), \
            rebuild digests compared \(rebuildsCompared), leftover files \(leftovers.count)
            violations \(violations.count)
            """
    }
}
