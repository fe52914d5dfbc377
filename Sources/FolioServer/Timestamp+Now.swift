import FolioModel
import Glibc

extension Timestamp {
    /// The wall clock (`clock_gettime(CLOCK_REALTIME)`), to the millisecond. Read at the edge only:
    /// by the writer when it accepts a command, and by reads that compare with the present.
    static var now: Timestamp {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Timestamp(milliseconds: Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000)
    }
}
