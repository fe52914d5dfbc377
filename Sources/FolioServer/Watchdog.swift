import Synchronization

/// systemd's watchdog (`WatchdogSec=`): every event loop beats as it goes round, and the first loop
/// pings systemd (`WATCHDOG=1`) at half the watchdog's time, but only while every loop has beaten
/// within that time. A loop that is stuck stops the pings, and systemd restarts foliod.
final class Watchdog: Sendable {
    let interval: UInt64
    private let manager: ServiceManager
    /// The last beat of each loop (monotonic ms).
    private let beats: Mutex<[UInt64]>
    private let lastPing = Atomic<UInt64>(0)

    init(manager: ServiceManager, interval: UInt64, loops: Int) {
        self.manager = manager
        self.interval = interval
        beats = Mutex([UInt64](repeating: monotonicMilliseconds(), count: loops))
    }

    /// Called by loop `index` at least once per `interval`.
    func beat(loop index: Int, now: UInt64) {
        let healthy = beats.withLock { beats in
            beats[index] = now
            return beats.allSatisfy { now <= $0 + 2 * interval }
        }
        guard index == 0, healthy, now >= lastPing.load(ordering: .relaxed) + interval else { return }
        lastPing.store(now, ordering: .relaxed)
        manager.notify("WATCHDOG=1")
    }
}
