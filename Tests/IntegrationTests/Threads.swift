import FolioHarness
import Foundation

/// Runs `body(0) ... body(count - 1)` at once, each on its own thread (real threads: the clients
/// block on their sockets), and waits for all. Returns the errors thrown, by index.
func runOnThreads(_ count: Int, timeout: Double = 120, _ body: @escaping @Sendable (Int) throws -> Void) -> [(
    index: Int, error: any Error
)] {
    let errors = Locked<[(index: Int, error: any Error)]>([])
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        let thread = Thread {
            defer { group.leave() }
            do { try body(index) } catch { errors.withLock { $0.append((index, error)) } }
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
    if group.wait(timeout: .now() + timeout) == .timedOut {
        errors.withLock { $0.append((-1, DaemonError("threads still running after \(timeout) s"))) }
    }
    return errors.current.sorted { $0.index < $1.index }
}
