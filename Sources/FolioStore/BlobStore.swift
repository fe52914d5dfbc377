import FolioModel
import Foundation
import Glibc
import Synchronization

/// The contents of files, one file per distinct content outside LMDB's map: `DATA/blobs/ab/cdef…`,
/// named by the hex SHA-256 of the content. A blob is written to `DATA/blobs/tmp/`, flushed, renamed
/// into place and its directories flushed before the event that names it may commit, so a
/// committed name never lacks its content; content already stored is not written again.
///
/// Blobs no name refers to are removed by `sweep`, never while a put that names them is between
/// writing (or finding) its blob and the commit of its event: such a put holds a pin on the blob.
/// Nor while a verify or a backup runs (`holdingSweeps`): each reads one snapshot, whose blobs must
/// stay even if their names go meanwhile. Thread-safe.
public final class BlobStore: Sendable {
    /// `DATA/blobs`.
    public let directory: String
    var temporaryDirectory: String { directory + "/tmp" }
    /// Pins per blob (hex SHA-256), and the blobs a sweep saw unreferenced, with when it first did
    /// (monotonic seconds). One lock for both: a sweep decides and deletes under it, so a put pins
    /// either before (and the blob stays) or after (and finds it gone, and writes it again).
    /// `holds`: how many verifies and backups are running; while any is, a sweep removes nothing.
    private let state = Mutex<(pins: [String: Int], unreferencedSince: [String: Double], holds: Int)>(([:], [:], 0))

    public init(directory: String) {
        self.directory = directory
    }

    /// The blob's path: `DATA/blobs/ab/cdef…`.
    public func path(of sha256: String) -> String {
        "\(directory)/\(sha256.prefix(2))/\(sha256.dropFirst(2))"
    }

    /// Hashes `content`, stores it unless a blob of that hash exists, and pins it: release the pin
    /// with `unpin` once the event naming it has committed or failed. Throws `StoreError.unusable`
    /// if the blob cannot be written (a full disk), leaving no partial blob behind.
    public func store(_ content: UnsafeRawBufferPointer) throws -> (sha256: String, size: UInt64) {
        let hasher = SHA256Hasher()
        hasher.update(content)
        let sha256 = hexString(hasher.finalize())
        pin(sha256)
        do {
            let target = path(of: sha256)
            if access(target, F_OK) != 0 {
                try write(content, as: sha256)
            } else {
                // Stored already, perhaps by a put of the same content that renamed it and has not
                // yet flushed its directory: flush it, so this put's event never outlives the entry.
                try syncDirectory((target as NSString).deletingLastPathComponent)
            }
        } catch {
            unpin(sha256)
            throw error
        }
        return (sha256, UInt64(content.count))
    }

    public func pin(_ sha256: String) {
        state.withLock { $0.pins[sha256, default: 0] += 1 }
    }

    public func unpin(_ sha256: String) {
        state.withLock { state in
            let left = (state.pins[sha256] ?? 1) - 1
            state.pins[sha256] = left > 0 ? left : nil
        }
    }

    /// Runs `body` with sweeps held off: no blob is removed until it returns.
    public func holdingSweeps<T>(_ body: () throws -> T) rethrows -> T {
        state.withLock { $0.holds += 1 }
        defer { state.withLock { $0.holds -= 1 } }
        return try body()
    }

    private func write(_ content: UnsafeRawBufferPointer, as sha256: String) throws {
        let writer = try BlobWriter(into: self, sha256: sha256)
        do {
            try writer.append(content)
            try writer.finish()
        } catch {
            writer.abandon()
            throw error
        }
    }

    /// Up to `length` bytes of a blob from `offset`.
    public func read(_ sha256: String, offset: UInt64, length: Int) throws -> [UInt8] {
        let file = path(of: sha256)
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw StoreError.corrupted("the content of \(sha256) is missing: open \(file): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: length)
        var done = 0
        while done < length {
            let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, length - done, off_t(offset) + off_t(done)) }
            if count < 0 {
                if errno == EINTR { continue }
                throw StoreError.corrupted("read \(file): \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            done += count
        }
        bytes.removeLast(length - done)
        return bytes
    }

    /// Removes what puts interrupted by a crash left in `DATA/blobs/tmp/`; call at start, before
    /// any put. Returns how many files it removed.
    @discardableResult
    public func removeTemporaryFiles() -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: temporaryDirectory) else { return 0 }
        return names.filter { unlink("\(temporaryDirectory)/\($0)") == 0 }.count
    }

    /// Every blob on disk, by hex SHA-256.
    public func storedBlobs() -> [String] {
        let manager = FileManager.default
        guard let shards = try? manager.contentsOfDirectory(atPath: directory) else { return [] }
        var blobs: [String] = []
        for shard in shards where shard.utf8.count == 2 {
            for rest in (try? manager.contentsOfDirectory(atPath: "\(directory)/\(shard)")) ?? [] where rest.utf8.count == 62 {
                blobs.append(shard + rest)
            }
        }
        return blobs
    }

    /// Removes the blobs that no name has referred to for `grace` seconds, as seen by the sweeps
    /// so far, and that no put holds. `isReferenced` reads the file index in a fresh snapshot.
    /// Returns the blobs removed.
    @discardableResult
    public func sweep(grace: Double, now: Double, isReferenced: (String) throws -> Bool) rethrows -> [String] {
        var removed: [String] = []
        var seen = Set<String>()
        for sha256 in storedBlobs() {
            seen.insert(sha256)
            try state.withLock { state in
                guard state.holds == 0 else { return }
                guard state.pins[sha256] == nil, try !isReferenced(sha256) else {
                    state.unreferencedSince[sha256] = nil
                    return
                }
                guard let since = state.unreferencedSince[sha256] else {
                    state.unreferencedSince[sha256] = now
                    return
                }
                guard now - since >= grace else { return }
                if unlink(path(of: sha256)) == 0 { removed.append(sha256) }
                state.unreferencedSince[sha256] = nil
            }
        }
        state.withLock { state in state.unreferencedSince = state.unreferencedSince.filter { seen.contains($0.key) } }
        return removed
    }

    func makeDirectory(_ path: String) throws {
        if mkdir(path, 0o700) != 0 && errno != EEXIST { throw failure("mkdir \(path)") }
    }

    func syncDirectory(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw failure("open \(path)") }
        defer { close(fd) }
        try retrying("fsync \(path)") { fsync(fd) }
    }

    func retrying(_ call: String, _ body: () -> Int32) throws {
        while body() != 0 {
            if errno != EINTR { throw failure(call) }
        }
    }

    /// What a failed system call means for the put: the file was not stored (a full disk, most
    /// likely), so the client may try again.
    func failure(_ call: String) -> StoreError {
        let reason = errno == ENOSPC || errno == EDQUOT ? "storage is full: " : ""
        return .unusable("the file was not stored: \(reason)\(call): \(String(cString: strerror(errno)))")
    }
}
