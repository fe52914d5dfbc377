import FolioModel
import FolioProtocol
import FolioStore
import Foundation
import Glibc
import Synchronization

/// The uploads in pieces that are open: `file.begin` makes one, `file.write` adds pieces at any
/// offset, `file.commit` stores the content as a blob (and the writer then binds the name),
/// `file.abort` forgets it. Each upload is a file in `blobs/tmp/` and belongs to the connection that
/// began it; it is removed when aborted, when its connection closes, when it idles past the upload
/// timeout (`expire`), and at start if a crash left it (`BlobStore.removeTemporaryFiles`).
///
/// The ops of one connection run one at a time, in request order (the event loop's upload turn), so
/// an upload is never touched by two ops at once; the lock guards the table against the connection
/// closing or the idle sweep meanwhile. Thread-safe.
final class Uploads: Sendable {
    /// Open uploads one connection may hold.
    static let perConnection = 16
    /// Separate runs of bytes one upload may hold before its holes are filled: pieces written in
    /// order make one.
    static let maxRuns = 4096
    /// Pieces that arrive in order go to the disk every this many bytes, not all at the commit.
    static let writebackBytes: UInt64 = 8 << 20

    let blobs: BlobStore
    private let statistics: ServerStatistics
    private let table = Mutex<(uploads: [String: Upload], lastUse: [String: UInt64])>(([:], [:]))

    init(blobs: BlobStore, statistics: ServerStatistics) {
        self.blobs = blobs
        self.statistics = statistics
    }

    /// One upload's file and what its pieces covered so far.
    final class Upload: @unchecked Sendable {
        let id: String
        let owner: ObjectIdentifier
        let plan: UploadPlan
        let maxSize: UInt64
        let fd: Int32
        let path: String
        /// Disjoint, sorted, non-adjacent runs of bytes written: `[start, end)`.
        var runs: [(start: UInt64, end: UInt64)] = []
        /// The SHA-256 of bytes `0..<hashed`, fed as pieces arrive in order; the commit hashes the rest.
        var hasher = SHA256Hasher()
        var hashed: UInt64 = 0
        /// Bytes `0..<writtenBack` were handed to the disk (`BlobStore.startWriteback`).
        var writtenBack: UInt64 = 0
        /// The file went to the blob store: nothing to remove.
        var adopted = false

        init(id: String, owner: ObjectIdentifier, plan: UploadPlan, maxSize: UInt64, fd: Int32, path: String) {
            self.id = id
            self.owner = owner
            self.plan = plan
            self.maxSize = maxSize
            self.fd = fd
            self.path = path
        }

        /// Closes the file and, unless it was stored, removes it: when the last op holding the upload
        /// is done with it, after it left the table.
        deinit {
            close(fd)
            if !adopted { unlink(path) }
        }

        var received: UInt64 { runs.reduce(0) { $0 + $1.end - $1.start } }

        /// Records `start..<end` as written, merging runs it touches or overlaps.
        func cover(_ start: UInt64, _ end: UInt64) {
            var merged = (start: start, end: end)
            var kept: [(start: UInt64, end: UInt64)] = []
            kept.reserveCapacity(runs.count + 1)
            var placed = false
            for run in runs {
                if run.end < merged.start {
                    kept.append(run)
                } else if run.start > merged.end {
                    if !placed {
                        kept.append(merged)
                        placed = true
                    }
                    kept.append(run)
                } else {
                    merged = (min(run.start, merged.start), max(run.end, merged.end))
                }
            }
            if !placed { kept.append(merged) }
            runs = kept
        }

    }

    /// Begins an upload for `owner`; answers its id.
    func begin(_ plan: UploadPlan, owner: ObjectIdentifier, maxSize: UInt64, now: UInt64) throws -> String {
        if let size = plan.size, size > maxSize {
            throw ProtocolError(
                .tooLarge,
                "file.begin: size \(size) is more than the largest file foliod takes (\(maxSize) bytes, --file-max-size)"
            )
        }
        let open = table.withLock { table in table.uploads.values.count { $0.owner == owner } }
        guard open < Self.perConnection else {
            throw ProtocolError(
                .tooLarge,
                "file.begin: this connection has \(open) uploads open, the most one may hold; commit or abort one")
        }
        var random = SystemRandomNumberGenerator()
        let id = "u" + [random.next(), random.next() as UInt64].map { String(format: "%016llx", $0) }.joined()
        let (fd, path) = try blobs.makeTemporaryFile()
        let upload = Upload(id: id, owner: owner, plan: plan, maxSize: maxSize, fd: fd, path: path)
        table.withLock { table in
            table.uploads[id] = upload
            table.lastUse[id] = now
        }
        statistics.uploads.add(1, ordering: .relaxed)
        return id
    }

    /// The owner's upload `id`, marked used now.
    private func upload(_ id: String, owner: ObjectIdentifier, now: UInt64, op: String) throws -> Upload {
        try table.withLock { table in
            guard let upload = table.uploads[id], upload.owner == owner else {
                throw ProtocolError(
                    .notFound,
                    "\(op): no upload \(Names.quoted(id)) is open on this connection (uploads end when committed, aborted, idle too long, or their connection closes)"
                )
            }
            table.lastUse[id] = now
            return upload
        }
    }

    /// Writes a piece: `content` at `offset`. A piece written again with the same bytes changes
    /// nothing. Answers how many bytes the upload holds.
    func write(_ id: String, offset: UInt64, content: UnsafeRawBufferPointer, owner: ObjectIdentifier, now: UInt64)
        throws -> UInt64
    {
        let upload = try upload(id, owner: owner, now: now, op: "file.write")
        let end = offset.addingReportingOverflow(UInt64(content.count))
        let limit = upload.plan.size ?? upload.maxSize
        guard !end.overflow, end.partialValue <= limit else {
            let what =
                upload.plan.size == nil
                ? "the largest file foliod takes (--file-max-size)" : "the size file.begin declared"
            throw ProtocolError(
                .badRequest,
                "file.write: a piece of \(content.count) bytes at offset \(offset) ends past \(limit) bytes, \(what)")
        }
        guard !content.isEmpty else { return upload.received }
        if offset < upload.hashed {
            // A retried piece is harmless; different bytes where some were hashed void that hash.
            let overlap = Int(min(end.partialValue, upload.hashed) - offset)
            var old = [UInt8](repeating: 0, count: overlap)
            let count = old.withUnsafeMutableBytes { pread(upload.fd, $0.baseAddress!, overlap, off_t(offset)) }
            if count != overlap || !old.elementsEqual(content[..<overlap]) {
                upload.hasher = SHA256Hasher()
                upload.hashed = 0
            }
        }
        if upload.runs.count >= Self.maxRuns
            && !upload.runs.contains(where: { $0.start <= end.partialValue && offset <= $0.end })
        {
            throw ProtocolError(
                .badRequest,
                "file.write: upload \(id) holds \(upload.runs.count) separate runs of bytes, the most one may; fill the holes between them first"
            )
        }
        try blobs.writeAll(content, to: upload.fd, at: offset, path: upload.path)
        if offset <= upload.hashed && upload.hashed < end.partialValue {
            upload.hasher.update(UnsafeRawBufferPointer(rebasing: content[Int(upload.hashed - offset)...]))
            upload.hashed = end.partialValue
            if upload.hashed - upload.writtenBack >= Self.writebackBytes {
                blobs.startWriteback(
                    fd: upload.fd, offset: upload.writtenBack, length: upload.hashed - upload.writtenBack)
                upload.writtenBack = upload.hashed
            }
        }
        upload.cover(offset, end.partialValue)
        return upload.received
    }

    /// Stores the upload's content as a blob, pinned (the caller unpins it once the event naming it
    /// is committed or failed), and ends the upload. Checks that the pieces cover the content
    /// without a hole, its declared size and SHA-256: if not, the upload stays open and nothing is
    /// stored. If the blob cannot be stored (a full disk), the upload ends too.
    func commit(_ id: String, owner: ObjectIdentifier, now: UInt64) throws -> (
        plan: UploadPlan, sha256: String, size: UInt64
    ) {
        let upload = try upload(id, owner: owner, now: now, op: "file.commit")
        let size = upload.runs.last?.end ?? 0
        guard upload.runs.count <= 1, upload.runs.first?.start ?? 0 == 0 else {
            let hole =
                upload.runs.first!.start > 0 ? (0, upload.runs[0].start) : (upload.runs[0].end, upload.runs[1].start)
            throw ProtocolError(
                .badRequest, "file.commit: upload \(id) lacks bytes \(hole.0) to \(hole.1); write them, then commit")
        }
        if let declared = upload.plan.size, declared != size {
            throw ProtocolError(
                .badRequest, "file.commit: upload \(id) holds \(size) bytes, not the \(declared) file.begin declared")
        }
        if upload.hashed < size {
            try BlobStore.hash(fd: upload.fd, from: upload.hashed, to: size, into: upload.hasher, path: upload.path)
            upload.hashed = size
        }
        let sha256 = hexString(upload.hasher.finalize())
        upload.hasher = SHA256Hasher()
        upload.hashed = 0
        if let expected = upload.plan.sha256, expected != sha256 {
            throw ProtocolError(
                .badRequest,
                "file.commit: upload \(id) holds \(size) bytes whose SHA-256 is \(sha256), not the \(expected) file.begin declared"
            )
        }
        do {
            // The file may run past the last piece recorded: a write of a piece that failed part
            // way (a full disk) left its first bytes there. The blob is the hashed bytes alone.
            while ftruncate(upload.fd, off_t(size)) != 0 {
                if errno != EINTR {
                    throw ProtocolError(
                        .unavailable,
                        "file.commit: cannot cut upload \(id) to \(size) bytes: \(String(cString: strerror(errno)))")
                }
            }
            try blobs.adopt(fd: upload.fd, path: upload.path, sha256: sha256)
        } catch {
            unlink(upload.path)
            // adopt removed the upload's file: the upload is over.
            remove(id)
            throw error
        }
        upload.adopted = true
        remove(id)
        return (upload.plan, sha256, size)
    }

    func abort(_ id: String, owner: ObjectIdentifier, now: UInt64) throws {
        _ = try upload(id, owner: owner, now: now, op: "file.abort")
        remove(id)
    }

    private func remove(_ id: String) {
        remove { table in table.uploads[id] == nil ? [] : [id] }
    }

    /// Ends every upload of a connection that closed.
    func abandon(owner: ObjectIdentifier) {
        remove { table in table.uploads.values.filter { $0.owner == owner }.map(\.id) }
    }

    /// Ends the uploads unused for `timeout` ms; answers how many.
    @discardableResult
    func expire(now: UInt64, timeout: UInt64) -> Int {
        remove { table in table.lastUse.filter { now >= $0.value && now - $0.value >= timeout }.map(\.key) }
    }

    /// Takes the uploads `chosen` names out of the table (and out of `stats.uploads`); answers how
    /// many. They are released outside the lock: the last release of each closes and removes its file.
    @discardableResult
    private func remove(_ chosen: (inout (uploads: [String: Upload], lastUse: [String: UInt64])) -> [String]) -> Int {
        let gone = table.withLock { table in
            chosen(&table).compactMap { id in
                table.lastUse[id] = nil
                return table.uploads.removeValue(forKey: id)
            }
        }
        statistics.uploads.subtract(gone.count, ordering: .relaxed)
        return gone.count
    }
}
