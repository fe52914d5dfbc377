/// The thread ids of a process, from the entries of `/proc/PID/task`.
enum ProcessThreads {
    static func ids(of pid: Int32) -> [Int32]? {
        ProcFile.names(in: "/proc/\(pid)/task")?.compactMap { Int32($0) }
    }
}
