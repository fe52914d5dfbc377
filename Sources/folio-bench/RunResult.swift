/// The outcome of one scenario against one daemon (rounds merged).
struct RunResult {
    var tally: Tally
    /// Seconds measured, summed over rounds.
    var seconds: Double
    /// Nil when the daemon's pid is unknown.
    var memory: MemoryWatch?
    /// CPU time the daemon used during the measured seconds (all its threads); nil when its pid is unknown.
    var cpuSeconds: Double?
    /// The same, per thread name.
    var threadCPU: ThreadCPU?

    var operationsPerSecond: Double { seconds > 0 ? Double(tally.operations) / seconds : 0 }

    /// The daemon's CPU time per answered request, in microseconds.
    var cpuMicrosecondsPerOperation: Double? {
        guard let cpuSeconds, tally.operations > 0 else { return nil }
        return cpuSeconds * 1e6 / Double(tally.operations)
    }

    mutating func merge(_ other: RunResult) {
        tally.merge(other.tally)
        seconds += other.seconds
        cpuSeconds = cpuSeconds.flatMap { mine in other.cpuSeconds.map { mine + $0 } }
        if var threads = threadCPU, let others = other.threadCPU {
            threads.add(others)
            threadCPU = threads
        } else {
            threadCPU = nil
        }
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
