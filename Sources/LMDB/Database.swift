import CLMDB

/// A named database inside an environment. Opened once at start-up; the handle stays valid until the
/// environment is closed.
public struct Database: Sendable, Hashable {
    let handle: MDB_dbi
    public let name: String
}

/// Entry counts and page use of one database, from `mdb_stat`.
public struct DatabaseStatistics: Sendable {
    public let entries: Int
    public let depth: Int
    public let branchPages: Int
    public let leafPages: Int
    public let overflowPages: Int

    init(_ stat: MDB_stat) {
        entries = Int(stat.ms_entries)
        depth = Int(stat.ms_depth)
        branchPages = Int(stat.ms_branch_pages)
        leafPages = Int(stat.ms_leaf_pages)
        overflowPages = Int(stat.ms_overflow_pages)
    }

    public var pages: Int { branchPages + leafPages + overflowPages }
}
