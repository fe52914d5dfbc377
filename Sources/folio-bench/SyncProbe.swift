import Glibc

/// Measures the disk under a directory the way a durable write uses it: append 4 KiB and
/// `fdatasync`, repeatedly. Durable-write results mean little without this baseline.
struct SyncProbe {
    let directory: String
    var samples = 200

    func run() throws -> LatencyHistogram {
        let path = directory + "/folio-bench-sync-probe"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw BenchError.system("open \(path)", errno) }
        defer {
            close(fd)
            unlink(path)
        }
        let block = [UInt8](repeating: 0x2A, count: 4096)
        var latencies = LatencyHistogram()
        for index in 0..<samples {
            let start = MonotonicClock.now()
            let written = block.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(index * 4096)) }
            guard written == block.count else { throw BenchError.system("pwrite \(path)", errno) }
            guard fdatasync(fd) == 0 else { throw BenchError.system("fdatasync \(path)", errno) }
            latencies.record(MonotonicClock.now() - start)
        }
        return latencies
    }

    /// One line for the report.
    func describe() throws -> String {
        let latencies = try run()
        return
            "4 KiB append + fdatasync in \(directory), \(samples) times: p50 \(Report.duration(latencies.percentile(0.5))), "
            + "p99 \(Report.duration(latencies.percentile(0.99))), max \(Report.duration(latencies.maximum))"
    }
}
