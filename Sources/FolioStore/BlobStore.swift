import CFolioSystem
import Dispatch
import FolioModel
import Foundation
import Glibc
import Synchronization

#if DEBUG
    import Failpoints
#endif

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

    /// Stores the content of a client's regular file, read from its start through its descriptor
    /// (which stays the caller's), hashing what is copied, and pins it like `store`. A file larger
    /// than `maxSize` is refused; the bytes stored are the ones hashed, even if the file changes as
    /// it is read.
    public func store(fromDescriptor source: Int32, maxSize: UInt64) throws -> (sha256: String, size: UInt64) {
        var status = stat()
        guard fstat(source, &status) == 0 else {
            throw StoreError.invalid("the descriptor passed cannot be examined: \(String(cString: strerror(errno)))")
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw StoreError.invalid("the descriptor passed is not a regular file")
        }
        guard UInt64(status.st_size) <= maxSize else {
            throw StoreError.invalid(
                "the file passed is \(status.st_size) bytes, more than the largest foliod takes (\(maxSize), --file-max-size)"
            )
        }
        let (fd, temporary) = try makeTemporaryFile()
        defer { close(fd) }
        do {
            let size = try copy(from: source, to: fd, path: temporary, maxSize: maxSize)
            // What is hashed is this copy, whatever the client's file does meanwhile; the copy is
            // flushed on another thread while it is hashed.
            let flushed = FlushResult()
            let group = DispatchGroup()
            DispatchQueue.global().async(group: group) { flushed.error = fsync(fd) == 0 ? 0 : errno }
            let hasher = SHA256Hasher()
            if size > 0 {
                guard let mapping = mmap(nil, Int(size), PROT_READ, MAP_SHARED, fd, 0), mapping != MAP_FAILED else {
                    group.wait()
                    throw failure("mmap \(temporary)")
                }
                madvise(mapping, Int(size), MADV_SEQUENTIAL)
                hasher.update(UnsafeRawBufferPointer(start: mapping, count: Int(size)))
                munmap(mapping, Int(size))
            }
            group.wait()
            if flushed.error != 0 {
                errno = flushed.error
                throw failure("fsync \(temporary)")
            }
            let sha256 = hexString(hasher.finalize())
            try adopt(fd: fd, path: temporary, sha256: sha256)
            return (sha256, size)
        } catch {
            unlink(temporary)
            throw error
        }
    }

    /// What the flushing thread of `store(fromDescriptor:)` found.
    private final class FlushResult: @unchecked Sendable {
        var error: Int32 = 0
    }

    /// Copies all of `source` from its start into `fd`, in the kernel where it can
    /// (`copy_file_range`), else through a buffer; refuses more than `maxSize` bytes.
    private func copy(from source: Int32, to fd: Int32, path: String, maxSize: UInt64) throws -> UInt64 {
        var copied: UInt64 = 0
        var inKernel = true
        var buffer: [UInt8] = []
        while true {
            let wanted = Int(min(UInt64(1 << 30), maxSize + 1 - copied))
            var count: Int
            if inKernel {
                var from = Int64(copied)
                var to = Int64(copied)
                count = folio_copy_file_range(source, &from, fd, &to, wanted)
                if count < 0 && [EXDEV, EINVAL, ENOSYS, EOPNOTSUPP, EBADF].contains(errno) && copied == 0 {
                    inKernel = false
                    continue
                }
            } else {
                if buffer.isEmpty { buffer = [UInt8](repeating: 0, count: 1 << 20) }
                count = buffer.withUnsafeMutableBytes {
                    pread(source, $0.baseAddress!, min($0.count, wanted), off_t(copied))
                }
                if count > 0 {
                    try buffer.withUnsafeBytes {
                        try writeAll(UnsafeRawBufferPointer(rebasing: $0[..<count]), to: fd, at: copied, path: path)
                    }
                }
            }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == ENOSPC || errno == EDQUOT { throw failure("copy into \(path)") }
                throw StoreError.invalid("the file passed cannot be read: \(String(cString: strerror(errno)))")
            }
            if count == 0 { return copied }
            copied += UInt64(count)
            guard copied <= maxSize else {
                throw StoreError.invalid(
                    "the file passed grew past the largest foliod takes (\(maxSize) bytes, --file-max-size)")
            }
        }
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

    /// A new, empty file in `blobs/tmp/` for content that arrives in pieces or from a client's
    /// descriptor: stored by `adopt`; removed at start if a crash leaves it. The caller closes the
    /// descriptor, and unlinks the file unless `adopt` took it.
    public func makeTemporaryFile() throws -> (fd: Int32, path: String) {
        try makeDirectory(directory)
        try makeDirectory(temporaryDirectory)
        let temporary = "\(temporaryDirectory)/\(UUID().uuidString)"
        let fd = open(temporary, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw failure("create \(temporary)") }
        return (fd, temporary)
    }

    /// Writes all of `content` at `offset` of the file `fd`.
    public func writeAll(_ content: UnsafeRawBufferPointer, to fd: Int32, at offset: UInt64, path: String) throws {
        var written = 0
        while written < content.count {
            let count = pwrite(
                fd, content.baseAddress! + written, content.count - written, off_t(offset) + off_t(written))
            if count < 0 {
                if errno == EINTR { continue }
                throw failure("write \(path)")
            }
            written += count
        }
    }

    /// Starts writing `length` bytes of a file being uploaded from `offset` to the disk, without
    /// waiting (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), so that the flush of its commit finds most
    /// of them written: the disk works while the rest arrives. Advisory: an error shows at the flush.
    public func startWriteback(fd: Int32, offset: UInt64, length: UInt64) {
        _ = folio_start_writeback(fd, Int64(offset), Int64(length))
    }

    /// Stores the content of a file `makeTemporaryFile` made, whose SHA-256 the caller computed:
    /// flushed and renamed into place as that blob, or removed when the blob is stored already.
    /// Pins the blob like `store`. The descriptor stays the caller's to close.
    public func adopt(fd: Int32, path temporary: String, sha256: String) throws {
        pin(sha256)
        do {
            let target = self.path(of: sha256)
            if access(target, F_OK) == 0 {
                unlink(temporary)
                try syncDirectory((target as NSString).deletingLastPathComponent)
            } else {
                try moveIntoPlace(fd: fd, temporary: temporary, target: target)
            }
        } catch {
            unpin(sha256)
            unlink(temporary)
            throw error
        }
    }

    /// Flushes the temporary file, makes it read-only, renames it to `target` and flushes both
    /// directories: after this, an event naming the blob may commit.
    func moveIntoPlace(fd: Int32, temporary: String, target: String) throws {
        let shard = (target as NSString).deletingLastPathComponent
        try makeDirectory(shard)
        try retrying("fchmod \(temporary)") { fchmod(fd, 0o444) }
        try retrying("fsync \(temporary)") { fsync(fd) }
        #if DEBUG
            try Failpoint.blobBeforeRename.check()
        #endif
        try retrying("rename \(temporary)") { rename(temporary, target) }
        try syncDirectory(shard)
        try syncDirectory(temporaryDirectory)
    }

    /// Feeds bytes `from..<to` of the file `fd` to `hasher`, a mebibyte at a time.
    public static func hash(fd: Int32, from start: UInt64, to end: UInt64, into hasher: SHA256Hasher, path: String)
        throws
    {
        var buffer = [UInt8](repeating: 0, count: min(1 << 20, Int(end - start)))
        var offset = start
        while offset < end {
            let wanted = Int(min(UInt64(buffer.count), end - offset))
            let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, wanted, off_t(offset)) }
            if count < 0 {
                if errno == EINTR { continue }
                throw StoreError.unusable("read \(path): \(String(cString: strerror(errno)))")
            }
            guard count > 0 else { throw StoreError.invalid("\(path) ends at \(offset) bytes, before \(end)") }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            offset += UInt64(count)
        }
    }

    /// Up to `length` bytes of a blob from `offset`.
    public func read(_ sha256: String, offset: UInt64, length: Int) throws -> [UInt8] {
        let file = path(of: sha256)
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw StoreError.corrupted(
                "the content of \(sha256) is missing: open \(file): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: length)
        var done = 0
        while done < length {
            let count = bytes.withUnsafeMutableBytes {
                pread(fd, $0.baseAddress! + done, length - done, off_t(offset) + off_t(done))
            }
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
            for rest in (try? manager.contentsOfDirectory(atPath: "\(directory)/\(shard)")) ?? []
            where rest.utf8.count == 62 {
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

    /// Creates the directory unless it exists, and then flushes its parent, which holds its name:
    /// `blobs/`, `blobs/tmp/` and each shard are made once, and a blob renamed into a shard is
    /// only as durable as the names leading to it.
    func makeDirectory(_ path: String) throws {
        if mkdir(path, 0o700) == 0 {
            try syncDirectory((path as NSString).deletingLastPathComponent)
        } else if errno != EEXIST {
            throw failure("mkdir \(path)")
        }
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
