import Foundation
import Glibc

/// What a blob on disk holds, as `BlobStore.hash` found it.
public enum BlobContent: Sendable, Equatable {
    case missing
    case unreadable(String)
    case read(sha256: String, size: UInt64)
}

extension BlobStore {
    /// The piece size in which blobs are hashed and copied: the whole of a blob is never in memory.
    static let chunkSize = 1 << 20

    /// The size of the blob on disk; nil if there is none.
    public func size(of sha256: String) -> UInt64? {
        var status = stat()
        guard stat(path(of: sha256), &status) == 0 else { return nil }
        return UInt64(status.st_size)
    }

    /// Re-hashes the blob named `sha256` from disk, in pieces of 1 MiB.
    public func hash(_ sha256: String) -> BlobContent {
        let hasher = SHA256Hasher()
        var size: UInt64 = 0
        do {
            guard
                try readChunks(
                    sha256,
                    { chunk in
                        hasher.update(chunk)
                        size += UInt64(chunk.count)
                    })
            else { return .missing }
        } catch {
            return .unreadable("\(error)")
        }
        return .read(sha256: hexString(hasher.finalize()), size: size)
    }

    /// Puts the blob `sha256` of `source` into this store: a hard link where both lie on one file
    /// system (a blob is never changed once written, so the two names may share it), else a copy
    /// written and flushed like any blob. Returns whether it linked; throws `corrupted` if `source`
    /// lacks the blob.
    @discardableResult
    public func adopt(_ sha256: String, from source: BlobStore) throws -> Bool {
        let target = path(of: sha256)
        let shard = (target as NSString).deletingLastPathComponent
        try makeDirectory(directory)
        try makeDirectory(shard)
        if Glibc.link(source.path(of: sha256), target) == 0 || errno == EEXIST {
            try syncDirectory(shard)
            return true
        }
        if errno == ENOENT { throw StoreError.corrupted("the content \(sha256) is missing from \(source.directory)") }
        guard errno == EXDEV || errno == EPERM || errno == EMLINK else { throw failure("link \(target)") }
        let writer = try BlobWriter(into: self, sha256: sha256)
        do {
            guard try source.readChunks(sha256, { try writer.append($0) }) else {
                throw StoreError.corrupted("the content \(sha256) is missing from \(source.directory)")
            }
            try writer.finish()
        } catch {
            writer.abandon()
            throw error
        }
        return false
    }

    /// Calls `body` with the blob's content in order, a piece of at most `chunkSize` bytes at a
    /// time; false if there is no such blob.
    func readChunks(_ sha256: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool {
        let file = path(of: sha256)
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        if fd < 0 && errno == ENOENT { return false }
        guard fd >= 0 else { throw StoreError.corrupted("open \(file): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let count = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw StoreError.corrupted("read \(file): \(String(cString: strerror(errno)))")
            }
            if count == 0 { return true }
            try body(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        }
    }
}
