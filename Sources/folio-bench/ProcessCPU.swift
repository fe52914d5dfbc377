import Glibc

/// CPU time a process has used, user plus system, from `/proc/PID/stat` (all its threads).
struct ProcessCPU {
    private static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    let seconds: Double

    static func read(pid: Int32) -> ProcessCPU? {
        guard let stat = ProcFile.read("/proc/\(pid)/stat"), let commandEnd = stat.lastIndex(of: ")") else { return nil }
        // After "pid (comm) ": state is field 3, utime and stime are fields 14 and 15.
        let fields = stat[stat.index(after: commandEnd)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return ProcessCPU(seconds: (user + system) / ticksPerSecond)
    }
}
