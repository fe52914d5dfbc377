/// CPU time of a target's processes at one moment, per process and per thread name, so that what
/// they used in between counts only the processes that ran throughout.
struct CPUTime {
    var secondsByProcess: [Int32: Double] = [:]
    var threadsByProcess: [Int32: ThreadCPU] = [:]

    /// Seconds used since `earlier` by the processes read both times, and per thread name.
    func since(_ earlier: CPUTime) -> (seconds: Double, threads: ThreadCPU) {
        var seconds = 0.0
        var threads = ThreadCPU()
        for (pid, now) in secondsByProcess {
            guard let before = earlier.secondsByProcess[pid] else { continue }
            seconds += now - before
            if let end = threadsByProcess[pid], let start = earlier.threadsByProcess[pid] {
                threads.add(end.since(start))
            }
        }
        return (seconds, threads)
    }
}
