import Foundation

/// Lets `count` threads wait for one another, so that they go on at the same moment.
final class StartingLine: @unchecked Sendable {
    private let condition = NSCondition()
    private var waiting: Int

    init(_ count: Int) { waiting = count }

    /// Blocks until `count` threads arrived (or `timeout` seconds passed).
    func arriveAndWait(timeout: Double = 60) {
        condition.lock()
        defer { condition.unlock() }
        waiting -= 1
        if waiting <= 0 {
            condition.broadcast()
            return
        }
        let deadline = Date().addingTimeInterval(timeout)
        while waiting > 0 && condition.wait(until: deadline) {}
    }
}
