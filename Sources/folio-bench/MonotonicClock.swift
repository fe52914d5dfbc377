import Glibc

/// Nanoseconds on `CLOCK_MONOTONIC`, and sleeping until a point on it.
enum MonotonicClock {
    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`, resumed after signals.
    static func sleep(until deadline: UInt64) {
        var time = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &time, nil) == EINTR {}
    }

    static func nanoseconds(seconds: Double) -> UInt64 { UInt64((seconds * 1e9).rounded()) }
}
