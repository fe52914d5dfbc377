import CFolioSystem
import Foundation
import Glibc

/// The listening Unix-domain socket. A socket file left by a daemon that died is replaced; one that
/// a live daemon answers on is not.
final class UnixListener: @unchecked Sendable {
    let path: String
    let fd: Int32
    /// Handed over by systemd (socket activation): foliod neither bound it nor removes its file.
    let inherited: Bool

    /// Takes a listening socket systemd passed; `path` is the configured one, for messages.
    init(inheritedFD fd: Int32, path: String) {
        self.fd = fd
        self.path = path
        inherited = true
    }

    /// Creates the parent directory if needed (mode 0700 when it creates it), binds and listens.
    /// `group`: the socket file's group, by name (nil: foliod's own).
    init(path: String, mode: mode_t = 0o660, group: String? = nil, blocking: Bool = false) throws {
        self.path = path
        inherited = false
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty && !FileManager.default.fileExists(atPath: parent) {
            try FileManager.default.createDirectory(
                atPath: parent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        // Only a stale socket file (one nobody listens on) is replaced: anything else at the path
        // (a mistyped path naming a data file, a symbolic link, a socket foliod may not connect to)
        // stays, and foliod does not start.
        var status = stat()
        if lstat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFSOCK else { throw ServerError.notASocket(path) }
            switch UnixListener.probe(path) {
            case 0: throw ServerError.socketInUse(path)
            case ECONNREFUSED: unlink(path)
            case let code: throw ServerError.notASocket(path, String(cString: strerror(code)))
            }
        }
        fd = folio_unix_socket(blocking ? 0 : 1)
        if fd < 0 { throw SystemError("socket") }
        do {
            guard folio_unix_bind(fd, path) == 0 else { throw SystemError("bind \(path)") }
            if let group {
                guard let entry = getgrnam(group) else {
                    throw ServerError.inheritedSockets("socket-group: no group named \(group)")
                }
                guard chown(path, uid_t.max, entry.pointee.gr_gid) == 0 else {
                    throw SystemError("chown \(path) to group \(group)")
                }
            }
            guard chmod(path, mode) == 0 else { throw SystemError("chmod \(path)") }
            guard listen(fd, 1024) == 0 else { throw SystemError("listen") }
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    /// Whether a process accepts connections on the socket at `path`.
    static func isAnswering(_ path: String) -> Bool { probe(path) == 0 }

    /// Connects to the socket at `path`: 0 if a process accepts connections on it, else the errno
    /// (ECONNREFUSED: a socket file nobody listens on).
    static func probe(_ path: String) -> Int32 {
        let probe = folio_unix_socket(0)
        guard probe >= 0 else { return errno }
        defer { Glibc.close(probe) }
        return folio_unix_connect(probe, path) == 0 ? 0 : errno
    }

    /// The group of the socket file: its members get the default policy's write role.
    var groupID: UInt32 {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_gid : getegid()
    }

    /// Stops listening and removes the socket file (unless systemd owns it).
    func close() {
        Glibc.close(fd)
        if !inherited { unlink(path) }
    }
}

/// An exclusive `flock` on `<data>/foliod.lock`, held while the daemon runs, so that a second daemon
/// on the same data directory refuses to start.
public final class DataDirectoryLock {
    private let fd: Int32

    public init(directory: String) throws {
        let path = directory + "/foliod.lock"
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if fd < 0 { throw SystemError("open \(path)") }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let holder =
                (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
                ?? ""
            throw ServerError.dataDirectoryInUse(directory, pid: holder)  // deinit closes fd
        }
        let pid = "\(getpid())\n"
        ftruncate(fd, 0)
        _ = pid.withCString { Glibc.pwrite(fd, $0, strlen($0), 0) }
    }

    deinit { Glibc.close(fd) }
}

/// Why the daemon cannot start or go on.
public enum ServerError: Error, CustomStringConvertible {
    case socketInUse(String)
    /// Something at the socket's path that is not a stale socket file: not replaced.
    case notASocket(String, String = "not a socket")
    case dataDirectoryInUse(String, pid: String)
    case inheritedSockets(String)
    case noReload
    /// Cluster mode cannot start: PostgreSQL, or a data directory that does not belong to its log.
    case cluster(String)

    public var description: String {
        switch self {
        case .cluster(let problem): return problem
        case .socketInUse(let path): return "another foliod is listening on \(path)"
        case .notASocket(let path, let reason):
            return
                "\(path) is in the way of the socket (\(reason)): foliod replaces only a socket file nobody listens on"
        case .dataDirectoryInUse(let directory, let pid):
            return "another foliod\(pid.isEmpty ? "" : " (pid \(pid))") is using the data directory \(directory)"
        case .inheritedSockets(let problem): return problem
        case .noReload: return "this foliod was started without a configuration to read again"
        }
    }
}
