import Glibc

/// CPU time a process (all its threads) or one thread has used, user plus system, from its `stat` file.
struct ProcessCPU {
    private static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    let seconds: Double

    static func read(pid: Int32) -> ProcessCPU? {
        ProcFile.read("/proc/\(pid)/stat").flatMap(ProcessCPU.init(stat:))
    }

    /// Parses a `stat` line of a process or of one of its threads (`/proc/PID/task/TID/stat`).
    init?(stat: String) {
        guard let commandEnd = stat.lastIndex(of: ")") else { return nil }
        // After "pid (comm) ": state is field 3, utime and stime are fields 14 and 15.
        let fields = stat[stat.index(after: commandEnd)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        seconds = (user + system) / Self.ticksPerSecond
    }
}
