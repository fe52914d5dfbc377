import Foundation
import Glibc

#if DEBUG
import Failpoints
#endif

/// A blob written in pieces: into `blobs/tmp/`, then flushed, renamed into place and its
/// directories flushed by `finish`, so that after a crash it is whole or absent. The caller vouches
/// that the content hashes to `sha256`. Used by one thread at a time.
public final class BlobWriter {
    private let store: BlobStore
    private let sha256: String
    private let temporary: String
    private var fd: Int32

    public init(into store: BlobStore, sha256: String) throws {
        self.store = store
        self.sha256 = sha256
        try store.makeDirectory(store.directory)
        try store.makeDirectory(store.temporaryDirectory)
        temporary = "\(store.temporaryDirectory)/\(UUID().uuidString)"
        fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o444)
        guard fd >= 0 else { throw store.failure("create \(temporary)") }
    }

    public func append(_ bytes: UnsafeRawBufferPointer) throws {
        var written = 0
        while written < bytes.count {
            let count = write(fd, bytes.baseAddress! + written, bytes.count - written)
            if count < 0 {
                if errno == EINTR { continue }
                throw store.failure("write \(temporary)")
            }
            written += count
        }
    }

    /// Flushes the blob and puts it in place; on failure, call `abandon`.
    public func finish() throws {
        try store.retrying("fsync \(temporary)") { fsync(fd) }
        close(fd)
        fd = -1
        #if DEBUG
        try Failpoint.blobBeforeRename.check()
        #endif
        let target = store.path(of: sha256)
        let shard = (target as NSString).deletingLastPathComponent
        try store.makeDirectory(shard)
        try store.retrying("rename \(temporary)") { rename(temporary, target) }
        try store.syncDirectory(shard)
        try store.syncDirectory(store.temporaryDirectory)
    }

    /// Removes what was written, unless `finish` put it in place.
    public func abandon() {
        if fd >= 0 {
            close(fd)
            fd = -1
        }
        unlink(temporary)
    }
}
