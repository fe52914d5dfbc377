import Glibc

/// How long an event loop keeps looking for work before it sleeps in `epoll_wait`, learnt the way
/// the Linux guest's haltpoll learns it. A loop that sleeps is woken by an interrupt to its vCPU,
/// which on a virtual machine must first wake the vCPU itself: a client reading one request at a
/// time waited about 20 µs for that at every request (a get by id at one client 43 µs at p50 with
/// the loop asleep between requests, 18 µs with it polling; docs/BENCHMARKS.md, "Event loops that
/// look for work before they sleep"). The window grows, from `start` and doubling up to `limit`, while
/// what woke the loop came within `limit` of its going to sleep, and halves down to nothing while
/// it did not: a loop with nothing coming soon sleeps at once.
///
/// Polling takes a vCPU, so the loop polls only when that takes it from no one: no write is in
/// flight (the writer's and the journal's threads need the CPU then, and a write's answer comes
/// after a sync, too late for a poll), no thread waits for a CPU (`/proc/loadavg` counts no more
/// threads running or ready than there are CPUs), and each turn yields the CPU to any thread
/// that wants it; a yield that let another thread run (the loop's thread was switched away from)
/// ends the poll, and the loop learns again only some waits later. (A turn that merely took long,
/// the host running something else on the vCPU, is no reason to stop: ending polls on turns over
/// 10 µs stopped a third of them in a run of pages read one at a time.)
struct IdlePoll {
    static let defaultLimit = 100
    static let maximumLimit = 1000
    /// The first window, in µs.
    static let start: UInt64 = 10

    /// The longest window, in µs; 0 never polls.
    let limit: UInt64
    /// How long the next poll may take, in µs.
    private(set) var window: UInt64 = 0
    /// Waits left before the window may grow again, after a poll lost the vCPU, and how many the
    /// next loss holds it off.
    private var holdOff = 0
    private var backOff = Self.holdOffWaits
    static let holdOffWaits = 64
    static let maximumHoldOff = 4096
    /// `/proc/loadavg`, opened once for every loop and read again from its start each time
    /// (`pread`: no offset shared between the loops).
    private static let loadavg = open("/proc/loadavg", O_RDONLY | O_CLOEXEC)
    private static let processors = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))

    /// Opens `/proc/loadavg` now, when polling is on: the loops are made at start, and a
    /// descriptor opened on a loop's first poll would appear in the middle of serving (a count of
    /// foliod's descriptors taken before it, as a test of passed descriptors takes, would be off by one).
    init(limit: UInt64) {
        self.limit = limit
        if limit > 0 { _ = Self.loadavg }
    }

    /// After a poll that found nothing (or none), how long (µs) the loop then slept.
    mutating func record(sleptMicroseconds slept: UInt64) {
        guard limit > 0 else { return }
        if holdOff > 0 {
            holdOff -= 1
            return
        }
        if slept <= limit {
            window = min(limit, max(Self.start, window * 2))
        } else {
            window /= 2
            if window < Self.start { window = 0 }
        }
    }

    /// A turn of the poll gave the vCPU to another thread: stop polling, and learn again only some
    /// waits later, twice as many each time this happens before a poll finds work (from
    /// `holdOffWaits` up to `maximumHoldOff`), so that a loop sharing its vCPU with its client
    /// soon stops trying while one disturbed now and then by another thread keeps polling.
    mutating func preempted() {
        window = 0
        holdOff = backOff
        backOff = min(backOff * 2, Self.maximumHoldOff)
    }

    /// A poll found work that came while it looked.
    mutating func found() { backOff = Self.holdOffWaits }

    /// How many times the calling thread has been switched away from while it could run: a yield
    /// that let another thread run counts one.
    static func switchesAway() -> Int {
        var usage = rusage()
        // RUSAGE_THREAD (1): Glibc does not export its name to Swift.
        guard getrusage(__rusage_who_t(1), &usage) == 0 else { return 0 }
        return usage.ru_nivcsw
    }

    /// Whether no thread waits for a CPU, so that a poll takes one from no one.
    func machineHasRoom() -> Bool {
        let loadavg = Self.loadavg
        guard loadavg >= 0 else { return true }
        var buffer = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        return withUnsafeMutableBytes(of: &buffer) { bytes in
            let count = pread(loadavg, bytes.baseAddress, bytes.count, 0)
            guard count > 0, let running = Self.runnable(inLoadavg: UnsafeRawBufferPointer(rebasing: bytes[..<count]))
            else { return true }
            return running <= Self.processors
        }
    }

    /// The threads running or ready to run, from `/proc/loadavg`'s text ("0.52 0.58 0.59 3/412
    /// 12345": the number before the slash), or nil if it is not there.
    static func runnable(inLoadavg text: UnsafeRawBufferPointer) -> Int? {
        var spaces = 0
        var running = 0
        var digits = 0
        for byte in text {
            if spaces < 3 {
                if byte == UInt8(ascii: " ") { spaces += 1 }
                continue
            }
            if byte == UInt8(ascii: "/") { return digits > 0 ? running : nil }
            guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"), digits < 9 else { return nil }
            running = running * 10 + Int(byte - UInt8(ascii: "0"))
            digits += 1
        }
        return nil
    }
}
