/// The outcome of one scenario against one daemon (rounds merged).
struct RunResult {
    var tally: Tally
    /// Seconds measured, summed over rounds.
    var seconds: Double
    /// Nil when the daemon's pid is unknown.
    var memory: MemoryWatch?

    var operationsPerSecond: Double { seconds > 0 ? Double(tally.operations) / seconds : 0 }

    mutating func merge(_ other: RunResult) {
        tally.merge(other.tally)
        seconds += other.seconds
        if let next = other.memory {
            if var current = memory {
                current.merge(next)
                memory = current
            } else {
                memory = next
            }
        }
    }
}
