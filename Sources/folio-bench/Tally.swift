/// What a client (or a whole run) counted: latencies of the answered requests per kind of operation,
/// and the failures.
struct Tally {
    private(set) var latencies = Operation.Kind.allCases.map { _ in LatencyHistogram() }
    /// Requests answered with an error, at any time (warm-up included), plus connections lost.
    private(set) var failures = 0
    private(set) var firstFailure: String?

    var operations: UInt64 { latencies.reduce(0) { $0 + $1.count } }

    var allLatencies: LatencyHistogram {
        latencies.reduce(into: LatencyHistogram()) { $0.merge($1) }
    }

    func latencies(of kind: Operation.Kind) -> LatencyHistogram { latencies[kind.rawValue] }

    mutating func record(_ kind: Operation.Kind, latency: UInt64) {
        latencies[kind.rawValue].record(latency)
    }

    mutating func fail(_ message: String) {
        failures += 1
        if firstFailure == nil { firstFailure = message }
    }

    mutating func merge(_ other: Tally) {
        for index in latencies.indices { latencies[index].merge(other.latencies[index]) }
        failures += other.failures
        firstFailure = firstFailure ?? other.firstFailure
    }
}
