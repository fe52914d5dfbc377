import FolioModel
import Foundation
import Glibc
import Testing

@testable import FolioStore

/// Verify, backup and export of the file store's contents, on a real store in a temporary directory.
@Suite struct FileAuditTests {
    /// Stores `content` as a blob and binds `name` to it, as `file.put` does.
    static func put(_ store: Store, _ name: String, _ content: [UInt8]) throws -> String {
        let (sha256, size) = try content.withUnsafeBytes { try store.blobs.store($0) }
        defer { store.blobs.unpin(sha256) }
        _ = try TestWriter(store).write(
            .putFile(name: name, sha256: sha256, size: size, contentType: "application/octet-stream", replace: false))
        return sha256
    }

    /// A store in a temporary directory, with that directory for scratch and backups.
    static func withStore(_ body: (_ root: String, Store) throws -> Void) throws {
        try withTemporaryDirectory { root in
            let store = try Store(directory: root + "/store")
            defer { store.close() }
            try body(root, store)
        }
    }

    static func content(_ count: Int, seed: UInt8) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) ^ seed }
    }

    /// Makes the 0444 blob writable and flips one byte of it.
    static func corrupt(_ store: Store, _ sha256: String, at offset: Int) throws {
        let path = store.blobs.path(of: sha256)
        #expect(chmod(path, 0o644) == 0)
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        try handle.seek(toOffset: UInt64(offset))
        let byte = try #require(try handle.read(upToCount: 1)?.first)
        try handle.seek(toOffset: UInt64(offset))
        try handle.write(contentsOf: [byte ^ 0xFF])
        try handle.close()
    }

    @Test func verifyReHashesEveryBlobAndNamesTheFilesOfAChangedOrMissingOne() throws {
        try Self.withStore { root, store in
            let big = Self.content(3 << 20 | 17, seed: 1)
            let bigBlob = try Self.put(store, "big.bin", big)
            _ = try Self.put(store, "copy-of-big.bin", big)
            let smallBlob = try Self.put(store, "small.txt", Self.content(10, seed: 2))
            let intact = try store.verify(scratchDirectory: root + "/scratch")
            #expect(intact.isConsistent && intact.badBlobs.isEmpty)
            #expect(intact.blobsChecked == 2 && intact.blobBytes == UInt64(big.count + 10))

            try Self.corrupt(store, bigBlob, at: 2 << 20)
            #expect(unlink(store.blobs.path(of: smallBlob)) == 0)
            let report = try store.verify(scratchDirectory: root + "/scratch")
            #expect(!report.isConsistent && report.mismatches.isEmpty && report.chainBrokenAt == nil)
            let bad = Dictionary(uniqueKeysWithValues: report.badBlobs.map { ($0.sha256, $0) })
            #expect(bad[bigBlob]?.problem == "changed" && bad[bigBlob]?.names == ["big.bin", "copy-of-big.bin"])
            #expect(bad[smallBlob]?.problem == "missing" && bad[smallBlob]?.names == ["small.txt"])
            #expect(report.blobsChecked == 2 && report.blobBytes == UInt64(big.count))
        }
    }

    @Test func aVerifyHoldsOffSweepsSoTheBlobsOfItsSnapshotStay() throws {
        try withTemporaryDirectory { root in
            let blobs = BlobStore(directory: root + "/blobs")
            let (sha256, _) = try [UInt8(7)].withUnsafeBytes { try blobs.store($0) }
            blobs.unpin(sha256)
            #expect(blobs.sweep(grace: 0, now: 0) { _ in false }.isEmpty, "first seen unreferenced")
            blobs.holdingSweeps {
                #expect(blobs.sweep(grace: 0, now: 10) { _ in false }.isEmpty, "held")
            }
            #expect(blobs.sweep(grace: 0, now: 20) { _ in false } == [sha256])
        }
    }

    @Test func theFileIndexIsComparedWithTheReplayedLog() throws {
        try Self.withStore { root, store in
            _ = try Self.put(store, "kept", Self.content(5, seed: 3))
            _ = try store.environment.write { txn in try txn.delete(store.databases.files, FileIndex.nameKey("kept")) }
            let report = try store.verify(scratchDirectory: root + "/scratch")
            #expect(
                report.mismatches.contains {
                    $0.kind == "files" && $0.description.contains("for name kept is missing from the live store")
                }, "\(report.mismatches)")
        }
    }

    /// On another file system (tmpfs in /dev/shm) a blob cannot be linked: it is copied, whole,
    /// read-only, and the backup verifies.
    @Test func aBackupToAnotherFileSystemCopiesTheBlobs() throws {
        try Self.withStore { root, store in
            let content = Self.content(2 << 20 | 5, seed: 4)
            let sha256 = try Self.put(store, "big.bin", content)
            var onDisk = stat()
            var shm = stat()
            guard stat(root, &onDisk) == 0, stat("/dev/shm", &shm) == 0, onDisk.st_dev != shm.st_dev else { return }
            let target = "/dev/shm/folio-backup-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            defer { try? FileManager.default.removeItem(atPath: target) }
            let summary = try store.backup(to: target)
            #expect(summary.blobs == 1 && summary.linkedBlobs == 0 && summary.blobBytes == UInt64(content.count))
            let copy = target + "/blobs/" + sha256.prefix(2) + "/" + sha256.dropFirst(2)
            #expect(FileManager.default.contents(atPath: copy) == Data(content))
            var copied = stat()
            #expect(stat(copy, &copied) == 0 && copied.st_mode & 0o777 == 0o444 && copied.st_nlink == 1)
            let restored = try Store(directory: target)
            defer { restored.close() }
            let report = try restored.verify(scratchDirectory: root + "/scratch")
            #expect(report.isConsistent && report.blobsChecked == 1, "\(report.badBlobs)")
        }
    }
}
