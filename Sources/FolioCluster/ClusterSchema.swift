/// The tables and the append function that cluster nodes share in PostgreSQL (docs/CLUSTER.md).
public enum ClusterSchema {
    /// Bumped when the tables or the function change shape; a node refuses a log of another version.
    public static let version = 1
}
