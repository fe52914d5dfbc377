/// What a daemon answered to one operation.
enum Reply {
    case success
    /// An error answer, or an answer that does not fit the request; the text says which.
    case failure(String)
}

/// A connection that speaks one daemon's protocol. Operations sent together go out in one write
/// (a pipeline); their replies come back in order. Used by one thread at a time.
protocol LoadClient: AnyObject {
    func send(_ operations: [Operation]) throws
    /// The reply to the oldest operation sent and not yet answered.
    func receive() throws -> Reply
    /// The daemon's version and durability settings, for the report.
    func describeServer() throws -> String
}
