import FolioHarness
import Foundation
import Glibc
import Testing

/// A real foliod on a socket and data directory in a temporary directory of its own, for one test.
/// It is found as the integration tests find it: next to the test bundle (`swift build` puts it
/// there), or in `FOLIO_BIN_DIR`.
final class TestDaemon: @unchecked Sendable {
    let directory: String
    var socketPath: String { directory + "/folio.sock" }
    var logPath: String { directory + "/foliod.log" }
    private let lock = NSLock()
    private var process: ChildProcess?

    init(directory: String) {
        self.directory = directory
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "(no foliod log)" }

    /// Starts foliod and waits until its socket accepts connections.
    func start() throws {
        let foliod = try Self.foliodPath()
        let logFD = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        let nullFD = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer {
            close(logFD)
            close(nullFD)
        }
        var environment = ProcessInfo.processInfo.environment
        environment["FOLIO_SOCKET"] = nil
        environment["FOLIO_DATA"] = nil
        let child = try ChildProcess(
            executable: foliod, arguments: ["--data", directory + "/data", "--socket", socketPath],
            environment: environment,
            stdin: nullFD, stdout: logFD, stderr: logFD)
        lock.withLock { process = child }
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            guard child.isRunning else { throw TestFailure("foliod exited while starting; its log:\n\(log)") }
            if Self.accepts(socketPath) { return }
            usleep(10_000)
        }
        child.killAndWait()
        throw TestFailure("foliod did not accept connections within 30 s; its log:\n\(log)")
    }

    /// SIGTERM and wait; SIGKILL if it lingers.
    func stop() {
        guard
            let child = lock.withLock({
                defer { process = nil }
                return process
            })
        else { return }
        kill(child.processIdentifier, SIGTERM)
        if !child.waitForExit(timeout: 15) { child.killAndWait() }
    }

    /// `kill -9`: no chance to answer anything.
    func killHard() {
        guard
            let child = lock.withLock({
                defer { process = nil }
                return process
            })
        else { return }
        child.killAndWait()
    }

    private static func accepts(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.utf8.prefix(buffer.count - 1).enumerated() { buffer[index] = byte }
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
    }

    private static func foliodPath() throws -> String {
        if let explicit = ProcessInfo.processInfo.environment["FOLIO_BIN_DIR"], !explicit.isEmpty {
            return explicit + "/foliod"
        }
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var directory = URL(fileURLWithPath: executable).resolvingSymlinksInPath().deletingLastPathComponent()
        while directory.path != "/" {
            if FileManager.default.isExecutableFile(atPath: directory.path + "/foliod") {
                return directory.path + "/foliod"
            }
            directory = directory.deletingLastPathComponent()
        }
        throw TestFailure(
            "cannot find foliod above \(executable): build it (swift build --product foliod) or set FOLIO_BIN_DIR")
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs `body` with a foliod of its own in a fresh temporary directory; stops it and removes the
/// directory afterwards, also when `body` throws (and then records foliod's log).
func withDaemon<R>(
    isolation: isolated (any Actor)? = #isolation, _ body: (TestDaemon) async throws -> R
) async throws -> R {
    let directory = "/tmp/foliokit-" + UUID().uuidString.prefix(12).lowercased()
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let daemon = TestDaemon(directory: directory)
    defer { daemon.stop() }
    try daemon.start()
    do {
        return try await body(daemon)
    } catch {
        Issue.record("foliod log:\n\(daemon.log)")
        throw error
    }
}
