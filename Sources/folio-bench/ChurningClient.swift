import FolioHarness

/// Short-lived connections (`ConnectionChurn`, every shape in turn) at a steady rate on a thread of
/// their own, beside a long load.
final class ChurningClient: @unchecked Sendable {
    struct Counts {
        var cycles = 0
        var failures = 0
        var firstFailure: String?
    }

    private let counts = Locked(Counts())
    private let stopping = Locked(false)
    private var thread: ClientThread?

    init(socket: String, perSecond: Double) {
        let interval = UInt64(1e9 / perSecond)
        thread = ClientThread(name: "bench-churn") { [counts, stopping] in
            var next = MonotonicClock.now()
            var serial = 0
            while !stopping.withLock({ $0 }) {
                MonotonicClock.sleep(until: next)
                next += interval
                let shape = ConnectionChurn.shape(serial)
                serial += 1
                do {
                    try ConnectionChurn.cycle(shape, socket: socket)
                    counts.withLock { $0.cycles += 1 }
                } catch {
                    counts.withLock {
                        $0.cycles += 1
                        $0.failures += 1
                        $0.firstFailure = $0.firstFailure ?? "\(shape): \(error)"
                    }
                }
            }
        }
    }

    var current: Counts { counts.withLock { $0 } }

    func stop() -> Counts {
        stopping.withLock { $0 = true }
        thread?.join()
        thread = nil
        return current
    }
}
