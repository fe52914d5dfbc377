import CFolioSystem
import Foundation
import Glibc

/// What foliod tells systemd, by the notify protocol (one datagram per message to the socket in
/// `$NOTIFY_SOCKET`, `@name` for an abstract one; no libsystemd), and the listening socket systemd
/// may hand it (`$LISTEN_FDS`, `$LISTEN_PID`: fd 3). Outside systemd every call does nothing.
final class ServiceManager: @unchecked Sendable {
    private let notifySocket: String?
    /// Half of `$WATCHDOG_USEC`, in ms, when systemd watches this process.
    let watchdogInterval: UInt64?

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let pid = String(getpid())
        notifySocket = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        if let usec = environment["WATCHDOG_USEC"].flatMap(UInt64.init), usec > 0,
            environment["WATCHDOG_PID"].map({ $0 == pid }) ?? true
        {
            watchdogInterval = max(1, usec / 2000)
        } else {
            watchdogInterval = nil
        }
        unsetenv("NOTIFY_SOCKET")
        unsetenv("WATCHDOG_USEC")
        unsetenv("WATCHDOG_PID")
    }

    /// Sends `KEY=value` lines, e.g. `["READY=1", "STATUS=serving 12 events"]`.
    func notify(_ lines: String...) {
        guard let notifySocket else { return }
        let message = lines.joined(separator: "\n")
        _ = message.withCString { folio_notify(notifySocket, $0, strlen($0)) }
    }

    func status(_ text: String) { notify("STATUS=" + text) }

    /// The listening socket systemd passed (fd 3), if it passed one to this process; the
    /// variables are cleared so that no child takes it for its own.
    static func inheritedListener(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Int32?
    {
        defer {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_FDNAMES")
        }
        guard let pid = environment["LISTEN_PID"].flatMap(Int32.init), pid == getpid(),
            let count = environment["LISTEN_FDS"].flatMap(Int.init), count > 0
        else { return nil }
        let fd: Int32 = 3
        guard count == 1 else {
            throw ServerError.inheritedSockets("systemd passed \(count) sockets (LISTEN_FDS); foliod takes exactly one")
        }
        guard folio_is_listening_unix_socket(fd) == 1 else {
            throw ServerError.inheritedSockets(
                "descriptor 3 from systemd (LISTEN_FDS=1) is not a listening Unix stream socket")
        }
        guard folio_set_nonblocking_cloexec(fd) == 0 else { throw SystemError("fcntl on the inherited socket") }
        return fd
    }
}
