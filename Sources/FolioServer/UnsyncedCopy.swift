import FolioStore
import Foundation
import Glibc
import LMDB

/// A cluster node's copy of the log in LMDB is committed without flushing (`MDB_NOSYNC`): the log
/// and its durability are PostgreSQL's, so the copy must survive a crash of foliod, which it does
/// (its pages are in the page cache, written in LMDB's order), but not an OS crash or power loss,
/// after which its pages may have reached the disk in any order, damaging it where nothing shows.
///
/// So the node records, before the first commit it does not flush, the machine's boot id in
/// `DATA/unsynced`, flushed. A clean stop flushes `data.mdb` and removes the file; a failed flush
/// marks the copy in doubt. A node that starts and finds the file naming another boot (the machine
/// went down while the copy held commits that were not on disk) or in doubt removes its copy and
/// catches up from the log again. A node killed and restarted on the same boot keeps its copy: the
/// page cache holds every commit.
struct UnsyncedCopy: Sendable {
    static let fileName = "unsynced"

    /// What a start finds in the data directory.
    enum Finding: Equatable {
        /// No file: the copy was flushed when it was last closed, or has never been written.
        case flushed
        /// Unflushed commits of this boot: the page cache holds them.
        case thisBoot
        /// Unflushed commits of another boot, which may have reached the disk in part and out of order.
        case otherBoot(String)
        /// A flush of the copy failed: pages of it may be missing from the disk.
        case inDoubt(String)
        /// The file does not read as either.
        case unreadable(String)

        /// Why the copy cannot be trusted, or nil when it can.
        var damage: String? {
            switch self {
            case .flushed, .thisBoot: return nil
            case .otherBoot(let boot):
                return "it held commits not yet flushed to disk when the machine went down (boot \(boot))"
            case .inDoubt(let reason): return "a flush of it failed (\(reason))"
            case .unreadable(let text): return "\(fileName) reads '\(text)'"
            }
        }
    }

    let directory: String
    let bootID: String

    /// nil if the machine's boot id cannot be read (`BootID`): then a node flushes its copy at
    /// every commit.
    init?(directory: String, bootID boot: String? = BootID.current()) {
        guard let boot else { return nil }
        self.directory = directory
        bootID = boot
    }

    private var path: String { directory + "/" + Self.fileName }

    func find() -> Finding {
        guard FileManager.default.fileExists(atPath: path) else { return .flushed }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return .unreadable("(not UTF-8)") }
        let line = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if line.hasPrefix("boot ") {
            let boot = String(line.dropFirst(5))
            return boot == bootID ? .thisBoot : .otherBoot(boot)
        }
        if line.hasPrefix("in doubt: ") { return .inDoubt(String(line.dropFirst(10))) }
        return .unreadable(String(line.prefix(80)))
    }

    /// Removes the files of the copy (the log in PostgreSQL rebuilds it): LMDB's, and a single
    /// node's journal and checkpoint should a backup have brought them. `unsynced` stays, so a crash
    /// before the copy is rebuilt finds it again.
    func discard() throws {
        for name in ["data.mdb", "lock.mdb", Journal.checkpointName, Journal.journalName] {
            let file = directory + "/" + name
            guard unlink(file) == 0 || errno == ENOENT else {
                throw ServerError.cluster("cannot remove \(file): \(String(cString: strerror(errno)))")
            }
        }
        try Environment.flushDirectory(directory)
    }

    /// Records this boot before the first commit that is not flushed.
    func markThisBoot() throws { try write("boot \(bootID)\n") }

    /// After a failed flush: the next start discards the copy. Best effort: the disk already failed.
    func markInDoubt(_ reason: String) {
        try? write("in doubt: \(reason.replacingOccurrences(of: "\n", with: " "))\n")
    }

    /// After a clean stop's flush of `data.mdb`.
    func clear() throws {
        guard unlink(path) == 0 || errno == ENOENT else {
            throw ServerError.cluster("cannot remove \(path): \(String(cString: strerror(errno)))")
        }
        try Environment.flushDirectory(directory)
    }

    /// Writes the file whole or not at all: a temporary file, flushed, renamed, the directory flushed.
    private func write(_ text: String) throws {
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw ServerError.cluster("cannot create \(temporary): \(String(cString: strerror(errno)))")
        }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        var failure: String?
        if written != bytes.count {
            failure = written < 0 ? String(cString: strerror(errno)) : "a short write"
        } else if fsync(fd) != 0 {
            failure = String(cString: strerror(errno))
        }
        close(fd)
        if failure == nil, rename(temporary, path) != 0 { failure = String(cString: strerror(errno)) }
        if let failure {
            unlink(temporary)
            throw ServerError.cluster("cannot write \(path): \(failure)")
        }
        try Environment.flushDirectory(directory)
    }
}
