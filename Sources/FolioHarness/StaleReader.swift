import CFolioSystem
import Foundation
import Glibc

/// Leaves a reader slot taken in the live environment's lock file: `mdb_dump -a` (Debian's
/// lmdb-utils) reads the data directory into a 4 KiB pipe that nobody reads, so it blocks inside
/// its read transaction, and is killed there with SIGKILL.
public enum StaleReader {
    public static let tool = "mdb_dump"

    /// The path of `mdb_dump`, or nil when lmdb-utils is not installed.
    public static var path: String? {
        let directories = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        return directories.map { "\($0)/\(tool)" }.first { access($0, X_OK) == 0 }
    }

    /// The pid of the reader killed inside its read transaction, or nil if it finished first
    /// (everything it had to write fitted in the pipe).
    public static func leave(in dataDirectory: String) throws(HarnessError) -> pid_t? {
        guard let path else { throw HarnessError("\(tool) not found: install lmdb-utils") }
        var pipe: [Int32] = [0, 0]
        guard folio_pipe(&pipe) == 0 else { throw HarnessError("pipe2: \(String(cString: strerror(errno)))") }
        defer {
            close(pipe[0])
            close(pipe[1])
        }
        _ = fcntl(pipe[1], 1031 /* F_SETPIPE_SZ */, 4096)
        let nullDevice = open("/dev/null", O_RDWR | O_CLOEXEC)
        defer { close(nullDevice) }
        let reader: ChildProcess
        do {
            reader = try ChildProcess(
                executable: path, arguments: ["-a", dataDirectory], environment: ProcessInfo.processInfo.environment,
                stdin: nullDevice, stdout: pipe[1], stderr: nullDevice)
        } catch {
            throw HarnessError("\(error)")
        }
        // The pipe is full (the write end no longer writable) once the reader blocks in write().
        let deadline = ContinuousClock.now + .seconds(5)
        var writeEnd = pollfd(fd: pipe[1], events: Int16(POLLOUT), revents: 0)
        while ContinuousClock.now < deadline {
            guard reader.isRunning else { return nil }
            writeEnd.revents = 0
            if poll(&writeEnd, 1, 0) == 0 {
                usleep(2_000)
                reader.killAndWait()
                return reader.processIdentifier
            }
            usleep(1_000)
        }
        reader.killAndWait()
        return reader.processIdentifier
    }
}
