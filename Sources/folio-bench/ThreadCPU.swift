import Glibc

/// CPU time per thread name of a process, from `/proc/PID/task/*/stat` (threads of the same name
/// summed): shows which of a daemon's threads did the work, e.g. whether all its event loops did.
struct ThreadCPU {
    private(set) var secondsByName: [String: Double] = [:]

    static func read(pid: Int32) -> ThreadCPU? {
        guard let threads = ProcessThreads.ids(of: pid) else { return nil }
        var result = ThreadCPU()
        for tid in threads {
            guard let stat = ProcFile.read("/proc/\(pid)/task/\(tid)/stat"),
                let cpu = ProcessCPU(stat: stat), let threadName = Self.command(in: stat)
            else { continue }
            result.secondsByName[threadName, default: 0] += cpu.seconds
        }
        return result
    }

    /// What each thread name used since `earlier`.
    func since(_ earlier: ThreadCPU) -> ThreadCPU {
        var delta = ThreadCPU()
        for (name, seconds) in secondsByName {
            delta.secondsByName[name] = seconds - (earlier.secondsByName[name] ?? 0)
        }
        return delta
    }

    mutating func add(_ other: ThreadCPU) {
        for (name, seconds) in other.secondsByName { secondsByName[name, default: 0] += seconds }
    }

    /// The threads that used at least `minimum` seconds, busiest first: "name 1.23 s, ...".
    func summary(minimum: Double = 0.01) -> String {
        let busy = secondsByName.filter { $0.value >= minimum }.sorted { $0.value > $1.value }
        if busy.isEmpty { return "none busy" }
        return busy.map { name, seconds in "\(name) \(Report.seconds(seconds))" }.joined(separator: ", ")
    }

    /// The thread's name: between the first "(" and the last ")" of its stat line.
    private static func command(in stat: String) -> String? {
        guard let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")"), open < close else { return nil }
        return String(stat[stat.index(after: open)..<close])
    }
}
