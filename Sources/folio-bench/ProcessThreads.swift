import Glibc

/// The thread ids of a process, from the entries of `/proc/PID/task`.
enum ProcessThreads {
    static func ids(of pid: Int32) -> [Int32]? {
        guard let directory = opendir("/proc/\(pid)/task") else { return nil }
        defer { closedir(directory) }
        var ids: [Int32] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if let tid = Int32(name) { ids.append(tid) }
        }
        return ids
    }
}
