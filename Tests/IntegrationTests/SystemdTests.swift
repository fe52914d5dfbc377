import CFolioSystem
import FolioHarness
import FolioJSON
import Foundation
import Glibc
import Testing

/// foliod under systemd's protocols, with systemd's side played by the test: the notify socket
/// (readiness, status, watchdog, stopping) and socket activation (a listening socket on fd 3).
@Suite struct SystemdTests {
    /// A datagram socket bound at `path` ("@name": abstract), as systemd's notify socket.
    final class NotifySocket {
        let fd: Int32

        init(path: String) throws {
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let bytes = Array(path.utf8)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                for (index, byte) in bytes.enumerated() { raw[index] = byte }
                if path.hasPrefix("@") { raw[0] = 0 }
            }
            let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (path.hasPrefix("@") ? 0 : 1))
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
            }
            guard bound == 0 else { throw DaemonError("bind \(path): \(String(cString: strerror(errno)))") }
        }

        deinit { close(fd) }

        /// The messages received within `timeout` seconds, until `until` holds for one.
        func messages(timeout: Double, until done: (String) -> Bool = { _ in false }) -> [String] {
            var received: [String] = []
            let deadline = Date().addingTimeInterval(timeout)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while Date() < deadline {
                var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&entry, 1, 50) > 0 else { continue }
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { continue }
                let message = String(decoding: buffer[..<count], as: UTF8.self)
                received.append(message)
                if done(message) { break }
            }
            return received
        }
    }

    @Test(arguments: ["file", "abstract"])
    func readinessStatusWatchdogAndStoppingAreNotified(kind: String) throws {
        try withTemporaryDirectory { directory in
            let path =
                kind == "file"
                ? directory + "/notify" : "@folio-test-notify-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
            let notify = try NotifySocket(path: path)
            let daemon = RunningDaemon(directory: directory)
            daemon.environment = ["NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000"]
            defer { daemon.shutDown() }
            try daemon.start()
            let startup = notify.messages(timeout: 10) { $0.contains("READY=1") }
            let ready = try #require(startup.last, "no READY=1 within 10 s")
            #expect(ready.split(separator: "\n").contains("READY=1"))
            #expect(ready.contains("STATUS=serving 0 events, 0 objects"), "\(ready)")
            #expect(startup.first?.hasPrefix("STATUS=opening the store") == true, "\(startup)")
            // The watchdog is pinged at half of WATCHDOG_USEC: about 5 times a second here.
            let pings = notify.messages(timeout: 1.5).filter { $0 == "WATCHDOG=1" }
            #expect(pings.count >= 3, "\(pings.count) watchdog pings in 1.5 s")
            #expect(try daemon.stop() == 0)
            let stopping = notify.messages(timeout: 2) { $0.contains("STOPPING=1") }
            #expect(stopping.contains { $0.contains("STOPPING=1") }, "\(stopping)")
        }
    }

    /// Socket activation: foliod takes a listening socket on fd 3 (LISTEN_FDS=1, LISTEN_PID its
    /// own), serves on it, and neither binds nor removes the path.
    @Test func anInheritedListeningSocketIsServedAndLeftInPlace() throws {
        try Binaries.require()
        try withTemporaryDirectory { directory in
            let path = directory + "/activated.sock"
            let listener = folio_unix_socket(0)
            defer { close(listener) }
            #expect(folio_unix_bind(listener, path) == 0)
            #expect(listen(listener, 16) == 0)
            let logFD = open(directory + "/foliod.log", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
            defer { close(logFD) }
            let nullDevice = open("/dev/null", O_RDONLY | O_CLOEXEC)
            defer { close(nullDevice) }
            var environment = ProcessInfo.processInfo.environment
            environment["LISTEN_FDS"] = "1"
            // LISTEN_PID must be foliod's own pid: the shell's, which exec keeps.
            let process = try ChildProcess(
                executable: "/bin/sh",
                arguments: [
                    "-c", "LISTEN_PID=$$ exec \"$0\" \"$@\"", Binaries.foliod, "--data", directory + "/data",
                    "--socket", path,
                ],
                environment: environment, stdin: nullDevice, stdout: logFD, stderr: logFD, descriptors: [3: listener])
            defer { if process.isRunning { process.killAndWait() } }
            var answered = false
            for _ in 0..<300 where !answered {
                if let connection = try? TestConnection(path: path, timeout: 5),
                    (try? connection.request(["op": "hello"]))?.isOK == true
                {
                    answered = true
                } else {
                    usleep(20_000)
                }
            }
            #expect(answered, "foliod did not answer on the inherited socket")
            kill(process.processIdentifier, SIGTERM)
            #expect(process.waitForExit(timeout: 15) && process.exitStatus == 0)
            let log = fileText(directory + "/foliod.log")
            #expect(log.contains("(from systemd)"), "\(log)")
            #expect(FileManager.default.fileExists(atPath: path), "foliod removed the socket file systemd owns")
        }
    }

    @Test func aWrongInheritedDescriptorIsRefusedAtStart() throws {
        try Binaries.require()
        try withTemporaryDirectory { directory in
            let run = try CommandRun.run(
                "/bin/sh",
                [
                    "-c", "LISTEN_PID=$$ exec \"$0\" \"$@\" 3<>\(directory)/not-a-socket", Binaries.foliod, "--data",
                    directory + "/data", "--socket", directory + "/s",
                ], environment: ["LISTEN_FDS": "1"])
            #expect(run.status == 1, "\(run)")
            #expect(run.stderr.contains("not a listening Unix stream socket"), "\(run)")
        }
    }
}
