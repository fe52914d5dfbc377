import CFolioSystem
import Glibc

/// Where the measuring thread and the daemons run while latency is measured.
///
/// On our VMs a request–response round trip over a Unix socket costs ~15 µs when client and daemon
/// share a vCPU and ~50 µs when the daemon has to be woken on the other one (for foliod too until
/// its loops learnt to look for work before they sleep, `--idle-poll`: ~20 µs then), and the
/// scheduler picks either as it likes, so an unpinned ratio can swing by 3× between runs.
/// Pinning both daemons alike compares like with like.
enum CPUPlacement: CaseIterable {
    /// Wherever the scheduler puts them.
    case unpinned
    /// The measuring thread and both daemons on CPU 0.
    case sameCPU
    /// The measuring thread on CPU 0, both daemons on CPU 1.
    case otherCPU

    var label: String {
        switch self {
        case .unpinned: return "unpinned"
        case .sameCPU: return "same CPU"
        case .otherCPU: return "other CPU"
        }
    }

    /// Moves the calling thread and every thread of `daemons` to this placement.
    func apply(daemons: [Int32]) throws {
        let all = UInt64.max >> (64 - min(64, max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))))
        let (client, daemon): (UInt64, UInt64)
        switch self {
        case .unpinned: (client, daemon) = (all, all)
        case .sameCPU: (client, daemon) = (1, 1)
        case .otherCPU: (client, daemon) = (1, 2)
        }
        try Self.pin(thread: 0, to: client)
        for pid in daemons {
            guard let threads = ProcessThreads.ids(of: pid) else { throw BenchError.setup("no process \(pid)") }
            for tid in threads { try Self.pin(thread: tid, to: daemon) }
        }
    }

    /// Whether the placements can be told apart here: pinning needs two CPUs.
    static var isAvailable: Bool { sysconf(Int32(_SC_NPROCESSORS_ONLN)) >= 2 }

    private static func pin(thread: Int32, to cpus: UInt64) throws {
        if folio_set_thread_cpus(thread, cpus) != 0 { throw BenchError.system("sched_setaffinity", errno) }
    }
}
