import Foundation
import Glibc

/// A child process started with `posix_spawn` and reaped with `waitpid`. Foundation's `Process`
/// is not safe to start from several threads at once: under load it crashed in `Process.run()` and
/// closed descriptors twice, cross-wiring other tests' sockets.
public final class ChildProcess: @unchecked Sendable {
    public let processIdentifier: pid_t
    private let lock = NSLock()
    private var waitStatus: Int32?

    /// Starts `executable`; the child's standard input, output and error are the given descriptors,
    /// and `descriptors` maps more of its descriptor numbers to descriptors of this process (a
    /// listening socket as fd 3, as systemd passes one).
    public init(
        executable: String, arguments: [String], environment: [String: String], stdin: Int32, stdout: Int32,
        stderr: Int32,
        descriptors: [Int32: Int32] = [:]
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdin, 0)
        posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        posix_spawn_file_actions_adddup2(&actions, stderr, 2)
        for (target, source) in descriptors.sorted(by: { $0.key < $1.key }) {
            posix_spawn_file_actions_adddup2(&actions, source, target)
        }
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid = pid_t()
        let rc = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        guard rc == 0 else { throw HarnessError("cannot start \(executable): \(String(cString: strerror(rc)))") }
        processIdentifier = pid
    }

    /// Reaps the child if it has ended.
    public var isRunning: Bool {
        lock.withLock {
            guard waitStatus == nil else { return false }
            var status: Int32 = 0
            if waitpid(processIdentifier, &status, WNOHANG) == processIdentifier { waitStatus = status }
            return waitStatus == nil
        }
    }

    /// Whether the process ended within `timeout` seconds.
    public func waitForExit(timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning && Date() < deadline { usleep(2_000) }
        return !isRunning
    }

    /// SIGKILL, then wait (up to 30 s) for the end; whether it ended.
    @discardableResult
    public func killAndWait() -> Bool {
        kill(processIdentifier, SIGKILL)
        return waitForExit(timeout: 30)
    }

    /// The exit status, or 128 + the signal number if a signal ended it (-1 while running).
    public var exitStatus: Int32 {
        guard !isRunning, let status = lock.withLock({ waitStatus }) else { return -1 }
        let signal = status & 0x7F
        return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
    }
}
