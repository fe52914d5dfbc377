import Glibc

/// A blob written in order, piece after piece (an import, a backup's copy): into `blobs/tmp/`,
/// then flushed, renamed into place and its directories flushed by `finish`, so that after a crash
/// it is whole or absent. The caller vouches that the content hashes to `sha256`. Used by one
/// thread at a time.
public final class BlobWriter {
    private let store: BlobStore
    private let sha256: String
    private let temporary: String
    private var fd: Int32
    private var written: UInt64 = 0

    public init(into store: BlobStore, sha256: String) throws {
        self.store = store
        self.sha256 = sha256
        (fd, temporary) = try store.makeTemporaryFile()
    }

    public func append(_ bytes: UnsafeRawBufferPointer) throws {
        try store.writeAll(bytes, to: fd, at: written, path: temporary)
        written += UInt64(bytes.count)
    }

    /// Flushes the blob and puts it in place; on failure, call `abandon`.
    public func finish() throws {
        try store.moveIntoPlace(fd: fd, temporary: temporary, target: store.path(of: sha256))
        close(fd)
        fd = -1
    }

    /// Removes what was written, unless `finish` put it in place.
    public func abandon() {
        if fd >= 0 {
            close(fd)
            fd = -1
            unlink(temporary)
        }
    }
}
