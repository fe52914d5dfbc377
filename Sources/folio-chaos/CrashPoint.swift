import FolioHarness

/// Where a cycle kills foliod. Every cycle also kills it once more when idle, after the checks,
/// to copy its data directory for `foliod rebuild`.
enum CrashPoint: CaseIterable, Hashable {
    /// At a random moment of the workload.
    case workload
    /// While it starts, before it answers (then it is started again for the workload).
    case startup
    /// While a `verify` request runs.
    case verify
    /// While a `backup` request runs.
    case backup
    /// Right after it logged that it grew the LMDB map, while the batch is retried.
    case mapGrowth
    /// After a reader process (mdb_dump) was killed inside its read transaction.
    case staleReader

    var weight: Int {
        switch self {
        case .workload: return 30
        case .startup: return 12
        case .verify: return 14
        case .backup: return 14
        case .mapGrowth: return 16
        case .staleReader: return 14
        }
    }

    var name: String {
        switch self {
        case .workload: return "workload"
        case .startup: return "start-up"
        case .verify: return "verify"
        case .backup: return "backup"
        case .mapGrowth: return "map growth"
        case .staleReader: return "stale reader"
        }
    }

    static func random(_ random: inout SplitMix64) -> CrashPoint {
        var draw = Int.random(in: 0..<allCases.reduce(0) { $0 + $1.weight }, using: &random)
        for point in allCases {
            draw -= point.weight
            if draw < 0 { return point }
        }
        return .workload
    }
}
