/// What a PostgreSQL call can fail with, split by what the caller may conclude.
public enum PostgresError: Error, CustomStringConvertible {
    /// Cannot connect, the connection was lost, or no answer within the timeout: the outcome of a
    /// statement in flight is unknown, and the connection is broken (`PostgresConnection.isBroken`).
    case unavailable(String)
    /// The server answered with an error: SQLSTATE (e.g. "40001", "P0001"), primary message, optional
    /// detail. The statement had no effect and the connection is still usable.
    case server(sqlState: String, message: String, detail: String?)

    public var description: String {
        switch self {
        case .unavailable(let reason): "PostgreSQL unavailable: \(reason)"
        case .server(let sqlState, let message, let detail):
            "PostgreSQL error \(sqlState): \(message)" + (detail.map { " (\($0))" } ?? "")
        }
    }
}
