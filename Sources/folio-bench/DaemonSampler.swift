import FolioClient
import FolioHarness

/// Takes a `DaemonSample` every `interval` on a thread of its own, over a connection of its own,
/// while a storm runs, so that the maximum memory and connections during it are seen, not only the
/// state before and after.
final class DaemonSampler: @unchecked Sendable {
    private let samples = Locked<[DaemonSample]>([])
    private let failure = Locked<String?>(nil)
    private let stopping = Locked(false)
    /// Used by the sampling thread only, once it runs.
    private let control: FolioConnection
    private var thread: ClientThread?

    init(pid: Int32, socket: String, intervalSeconds: Double) throws {
        control = try FolioConnection(path: socket)
        let interval = MonotonicClock.nanoseconds(seconds: intervalSeconds)
        thread = ClientThread(name: "bench-sampler") { [self] in
            var next = MonotonicClock.now()
            while !stopping.withLock({ $0 }) {
                do {
                    let sample = try DaemonSample.take(pid: pid, control: control)
                    samples.withLock { $0.append(sample) }
                } catch {
                    failure.withLock { $0 = "\(error)" }
                    return
                }
                next += interval
                MonotonicClock.sleep(until: max(next, MonotonicClock.now()))
            }
        }
    }

    /// The last sample taken so far.
    var latest: DaemonSample? { samples.withLock { $0.last } }

    /// Stops sampling and closes its connection; the samples taken, or the error that stopped the
    /// sampler early.
    func stop() throws -> [DaemonSample] {
        stopping.withLock { $0 = true }
        thread?.join()
        thread = nil
        control.close()
        if let message = failure.withLock({ $0 }) { throw BenchError.setup("sampling foliod failed: \(message)") }
        return samples.withLock { $0 }
    }
}
