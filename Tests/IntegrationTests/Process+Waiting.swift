import Foundation
import Glibc

/// Waiting for child processes by polling `isRunning`: Foundation's `waitUntilExit()` can miss the
/// exit of a child when several are started and end at once, and then waits forever.
extension Process {
    /// Whether the process ended within `timeout` seconds.
    func waitForExit(timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning && Date() < deadline { usleep(2_000) }
        return !isRunning
    }

    /// SIGKILL, then wait (up to 30 s) for the end; whether it ended.
    @discardableResult
    func killAndWait() -> Bool {
        kill(processIdentifier, SIGKILL)
        return waitForExit(timeout: 30)
    }

    /// The exit status, or 128 + the signal number if a signal ended it.
    var exitStatus: Int32 {
        terminationReason == .exit ? terminationStatus : 128 + terminationStatus
    }
}
