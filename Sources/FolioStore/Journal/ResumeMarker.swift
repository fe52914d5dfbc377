import Foundation
import Glibc
import LMDB

/// The machine's boot id: it changes at every boot, so a file that names the current one was
/// written since the last OS crash or power loss.
public enum BootID {
    public static let path = "/proc/sys/kernel/random/boot_id"

    /// The boot id, or nil if it cannot be read. `FOLIO_BOOT_ID` stands in for it, so that a test
    /// or a simulated power loss can start foliod as a machine that has restarted would.
    public static func current() -> String? {
        if let forced = ProcessInfo.processInfo.environment["FOLIO_BOOT_ID"] { return valid(forced) }
        return (try? String(contentsOfFile: path, encoding: .utf8)).flatMap(valid)
    }

    private static func valid(_ text: String) -> String? {
        let boot = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !boot.isEmpty, boot.count <= 64, !boot.contains(" ") else { return nil }
        return boot
    }
}

/// Whether a start may resume at LMDB's last commit instead of going back to the checkpoint and
/// applying the journal (docs/DURABILITY.md, "Resuming after a crash of foliod alone").
///
/// After a crash of foliod alone (`kill -9`, a fault, the OOM killer) the page cache holds every
/// commit it made, whole and in order: LMDB's last commit is intact and holds every answered write.
/// Going back to the checkpoint is needed only after an OS crash or power loss, when the disk may
/// hold any part of the commits since, or after a write-back of `data.mdb` failed, when the kernel
/// may drop pages it could not write and read the disk's stale ones back later.
///
/// `DATA/resume` says which: one line of `lineBytes`, rewritten in place and never flushed (it
/// speaks only for this boot). `clean boot=B format=F dev=D ino=I born=T` says that a foliod of
/// boot B flushed `data.mdb` (device D, inode I, birth time T, store format F) without a failure,
/// and that no flush of it has begun since; anything else (`dirty`, no file) says nothing. Every flush of `data.mdb` while
/// journaling goes through `Journal.flushData`: the line becomes `dirty` before it, and `clean`
/// again only once it succeeded. A flush that fails, or a foliod killed during one, leaves `dirty`:
/// the kernel reports a failed write-back to one flush only, so a later start could not tell.
/// A failure of a write-back that no flush has looked at yet is reported to the start's own flush.
final class ResumeMarker: @unchecked Sendable {
    static let fileName = "resume"
    static let lineBytes = 160

    let path: String
    let bootID: String?
    /// Open from the first `certify` on (or from the start, if the file was there), so that a
    /// flush never needs a descriptor it may not get. Touched by one thread at a time: the
    /// store's start, then the journal's checkpoints, which take turns.
    private var file: Int32

    init(directory: String, bootID: String?) {
        path = directory + "/" + Self.fileName
        self.bootID = bootID
        file = open(path, O_RDWR | O_CLOEXEC)
    }

    deinit { if file >= 0 { close(file) } }

    /// Before a flush of `data.mdb`, and before a start writes into it: the next start goes back to
    /// the checkpoint unless `certify` follows. If the line cannot be written the file is removed;
    /// if neither can be done this throws, and the flush must not run.
    func clear() throws {
        if file >= 0, (try? write("dirty")) != nil { return }
        // No file open: none was there, or it could not be opened.
        guard unlink(path) == 0 || errno == ENOENT else { throw StoreError.io("remove \(path)", errno) }
    }

    /// After a flush of `data.mdb` that succeeded. Best effort: a line left `dirty`, or no file,
    /// only makes the next start after a crash go back to the checkpoint.
    func certify(_ data: FileIdentity?) {
        guard let bootID, let data else { return }
        if file < 0 { file = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600) }
        guard file >= 0 else { return }
        try? write(Self.clean(bootID, data))
    }

    /// Whether the line says `clean` for this boot, this store format and `directory/data.mdb` as
    /// it is now.
    func allowsResuming(_ directory: String) -> Bool {
        guard let bootID, file >= 0, let data = Environment.dataFileIdentity(in: directory) else { return false }
        var bytes = [UInt8](repeating: 0, count: Self.lineBytes)
        let count = bytes.withUnsafeMutableBytes { pread(file, $0.baseAddress, $0.count, 0) }
        guard count == Self.lineBytes, let text = String(bytes: bytes, encoding: .utf8) else { return false }
        return text.trimmingCharacters(in: .whitespacesAndNewlines) == Self.clean(bootID, data)
    }

    /// With the journal's other files, when the journal is turned off.
    func remove() { unlink(path) }

    private static func clean(_ bootID: String, _ data: FileIdentity) -> String {
        "clean boot=\(bootID) format=\(StoreDatabases.formatVersion) \(data)"
    }

    private func write(_ line: String) throws {
        var bytes = Array(line.utf8)
        precondition(bytes.count < Self.lineBytes)
        bytes += [UInt8](repeating: UInt8(ascii: " "), count: Self.lineBytes - 1 - bytes.count) + [UInt8(ascii: "\n")]
        // One write of the whole line: a process killed meanwhile leaves it as it was or as written.
        let written = bytes.withUnsafeBytes { pwrite(file, $0.baseAddress, $0.count, 0) }
        guard written == bytes.count else { throw StoreError.io("write \(path)", written < 0 ? errno : EIO) }
    }
}
