import FolioModel
import Foundation

extension Store {
    /// What a copy of the store holds.
    public struct CopySummary: Sendable {
        public let directory: String
        public let lastSequence: UInt64
        public let chainHead: ChainHash
        public let digest: ChainHash
        public let bytes: Int
    }

    /// A hot, consistent, compacted copy of the environment in `directory` (created if needed, must be
    /// empty), taken from one snapshot while writers go on (`mdb_env_copy2` with `MDB_CP_COMPACT`).
    /// Returns what the copy holds, read back from the copy itself.
    public func backup(to directory: String) throws -> CopySummary {
        let manager = FileManager.default
        if manager.fileExists(atPath: directory) {
            guard (try manager.contentsOfDirectory(atPath: directory)).isEmpty else {
                throw StoreError.invalid("backup directory \(directory) is not empty")
            }
        } else {
            try manager.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let standardized = URL(fileURLWithPath: directory).standardizedFileURL.path
        guard standardized != URL(fileURLWithPath: self.directory).standardizedFileURL.path else {
            throw StoreError.invalid("backup directory is the data directory itself")
        }
        try environment.copy(to: directory, compact: true)
        let copy = try Store(directory: directory)
        defer { copy.close() }
        return try copy.read { snapshot in
            let head = try snapshot.head()
            let size = (try? manager.attributesOfItem(atPath: directory + "/data.mdb")[.size] as? Int) ?? 0
            return CopySummary(directory: directory, lastSequence: head.sequence, chainHead: head.hash, digest: try snapshot.digest(), bytes: size)
        }
    }
}
