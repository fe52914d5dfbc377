import Glibc

/// A process's resident memory from `/proc/PID/status`: `VmRSS` now, the part of it that is anonymous
/// (`RssAnon`: heap and stacks, not mapped files such as an LMDB map), and `VmHWM`, its peak since start.
struct ProcessMemory {
    var residentKiB: Int
    var anonymousKiB: Int
    var peakKiB: Int

    static func read(pid: Int32) -> ProcessMemory? {
        guard let status = ProcFile.read("/proc/\(pid)/status") else { return nil }
        var memory = ProcessMemory(residentKiB: 0, anonymousKiB: 0, peakKiB: 0)
        for line in status.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, let kib = Int(fields[1]) else { continue }
            switch fields[0] {
            case "VmRSS:": memory.residentKiB = kib
            case "RssAnon:": memory.anonymousKiB = kib
            case "VmHWM:": memory.peakKiB = kib
            default: break
            }
        }
        return memory
    }
}
