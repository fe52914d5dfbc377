import FolioModel
import Foundation
import Glibc
import LMDB

#if DEBUG
    import Failpoints
#endif

extension Store {
    /// What a copy of the store holds.
    public struct CopySummary: Sendable {
        public let directory: String
        public let lastSequence: UInt64
        public let chainHead: ChainHash
        public let digest: ChainHash
        public let bytes: Int
        /// The blobs the copy's names refer to, put in `directory/blobs`, and their bytes.
        public let blobs: UInt64
        public let blobBytes: UInt64
        /// How many of them are hard links to the live store's blobs (the rest are copies).
        public let linkedBlobs: UInt64
    }

    /// A hot, consistent, compacted copy of the environment in `directory` (created if needed, must be
    /// empty), taken from one snapshot while writers go on (`Environment.copy`, compacting), with
    /// every blob its names refer to (`BlobStore.adopt`: hard links where it can), all flushed to
    /// disk. Sweeps are held off from before the copy until every blob is in place, so none of the
    /// copy's blobs goes meanwhile. Returns what the copy holds, read back from the copy itself.
    public func backup(to directory: String) throws -> CopySummary {
        // One at a time: two into the same empty directory both found it empty, and the second's
        // copy replaced the first's, which had answered with a digest no longer on disk (and a
        // failure of the second removed what the first reported done).
        backups.lock()
        defer { backups.unlock() }
        return try blobs.holdingSweeps { try backupHoldingSweeps(to: directory) }
    }

    private func backupHoldingSweeps(to directory: String) throws -> CopySummary {
        let manager = FileManager.default
        let target = URL(fileURLWithPath: directory).resolvingSymlinksInPath().standardizedFileURL.path
        guard target != URL(fileURLWithPath: self.directory).resolvingSymlinksInPath().standardizedFileURL.path else {
            throw StoreError.invalid("backup directory \(directory) is the data directory itself")
        }
        var isDirectory: ObjCBool = false
        if manager.fileExists(atPath: directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw StoreError.invalid("backup directory \(directory) is a file") }
            guard ((try? manager.contentsOfDirectory(atPath: directory)) ?? ["?"]).isEmpty else {
                throw StoreError.invalid("backup directory \(directory) is not empty (or not readable)")
            }
        } else {
            let (created, problem) = Self.makeDirectories(directory)
            // Each new directory's entry, in its parent, so that the flushed copy can be found after
            // an OS crash (the parent of every directory made, not only the last one's).
            for made in created { try Environment.flushDirectory((made as NSString).deletingLastPathComponent) }
            if let problem { throw StoreError.invalid("cannot create backup directory \(problem)") }
        }
        let copy: Store
        do {
            try environment.copy(to: directory, compact: true)
            #if DEBUG
                try Failpoint.backupAfterCopy.check()
            #endif
            copy = try Store(directory: directory)
        } catch {
            Self.removeBackup(in: directory)
            if let error = error as? LMDBError, error.isOutOfSpace { throw error }
            throw StoreError.invalid("cannot write the backup into \(directory): \(error)")
        }
        defer { copy.close() }
        do {
            return try copy.read { snapshot in
                var blobs: UInt64 = 0
                var blobBytes: UInt64 = 0
                var linked: UInt64 = 0
                try snapshot.forEachBlob { sha256, size in
                    if try copy.blobs.adopt(sha256, from: self.blobs) { linked += 1 }
                    blobs += 1
                    blobBytes += size
                }
                if blobs > 0 {
                    try copy.blobs.syncDirectory(copy.blobs.directory)
                    try Environment.flushDirectory(directory)
                }
                let head = try snapshot.head()
                let size = (try? manager.attributesOfItem(atPath: directory + "/data.mdb")[.size] as? Int) ?? 0
                return CopySummary(
                    directory: directory, lastSequence: head.sequence, chainHead: head.hash,
                    digest: try snapshot.digest(), bytes: size,
                    blobs: blobs, blobBytes: blobBytes, linkedBlobs: linked)
            }
        } catch {
            Self.removeBackup(in: directory)
            throw error
        }
    }

    /// The directory was empty: what is in it now is this backup's, and of no use.
    private static func removeBackup(in directory: String) {
        for file in ["data.mdb", "lock.mdb", "blobs"] {
            try? FileManager.default.removeItem(atPath: directory + "/" + file)
        }
    }

    /// `mkdir -p` with mode 0700; nil when done, else the directory that could not be made and why.
    /// `mkdir -p`: the directories it made, and what stopped it.
    static func makeDirectories(_ path: String) -> (created: [String], problem: String?) {
        var built = path.hasPrefix("/") ? "" : "."
        var created: [String] = []
        for component in path.split(separator: "/") {
            built += "/" + component
            if mkdir(built, 0o700) == 0 {
                created.append(built)
            } else if errno != EEXIST {
                return (created, "\(built): \(String(cString: strerror(errno)))")
            }
        }
        return (created, nil)
    }
}
