import FolioModel
import Foundation
import Glibc
import LMDB
import Testing

@testable import FolioStore

/// A start after a crash of foliod alone resumes at LMDB's last commit, and goes back to the
/// checkpoint and the journal after anything else: another boot, a flush of `data.mdb` that failed
/// or was cut short, another file in `data.mdb`'s place (docs/DURABILITY.md, "Resuming after a
/// crash of foliod alone").
@Suite struct ResumeTests {
    static func journaled(_ path: String, boot: String?) throws -> Store {
        var options = Store.Options()
        options.journal = true
        options.journalSize = 1 << 20
        options.bootID = boot
        return try Store(directory: path, options: options)
    }

    /// 50 creates and a checkpoint, 70 more journaled past it, then closed as a kill leaves a store:
    /// closing neither flushes data.mdb nor checkpoints, so the 70 are in LMDB's page cache and in
    /// the journal only. Returns the digest.
    static func killed(_ path: String, boot: String?, first: Int = 0) throws -> ChainHash {
        let store = try journaled(path, boot: boot)
        let writer = TestWriter(store)
        writer.ids = ObjectIDGenerator(random: SeededGenerator(seed: UInt64(first + 1)))
        for index in first..<(first + 50) { try JournalTests.create(writer, index) }
        try store.journal!.checkpoint()
        for index in (first + 50)..<(first + 120) { try JournalTests.create(writer, index) }
        let digest = try store.read { try $0.digest() }
        store.close()
        return digest
    }

    /// Opens `path` on `boot` and expects the start to have gone back to the checkpoint, applied
    /// the 70 records past it, and come to `digest`.
    static func expectReplayed(
        _ path: String, boot: String?, digest: ChainHash, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let reopened = try journaled(path, boot: boot)
        defer { reopened.close() }
        #expect(reopened.recovery?.resumed == false, sourceLocation: sourceLocation)
        #expect(reopened.recovery?.records == 70, sourceLocation: sourceLocation)
        #expect(try reopened.read { try $0.digest() } == digest, sourceLocation: sourceLocation)
    }

    @Test func aStartOnTheSameBootResumesAtTheLastCommit() throws {
        try withTemporaryDirectory { root in
            let path = root + "/store"
            let digest = try Self.killed(path, boot: "boot-a")
            let reopened = try Self.journaled(path, boot: "boot-a")
            let recovery = try #require(reopened.recovery)
            #expect(recovery.resumed)
            #expect(recovery.records == 0)
            #expect(recovery.checkpointSequence == 50)
            #expect(recovery.sequence == 120)
            #expect(try reopened.read { try $0.digest() } == digest)
            // It goes on from there: writes, a kill, and a start that resumes again.
            let writer = TestWriter(reopened)
            writer.ids = ObjectIDGenerator(random: SeededGenerator(seed: 7))
            for index in 120..<160 { try JournalTests.create(writer, index) }
            let later = try reopened.read { try $0.digest() }
            reopened.close()
            let again = try Self.journaled(path, boot: "boot-a")
            defer { again.close() }
            #expect(again.recovery?.resumed == true)
            #expect(again.recovery?.sequence == 160)
            #expect(try again.read { try $0.digest() } == later)
            try expectVerifyRebuildAndReplayKeepTheDigest(again, root)
        }
    }

    @Test func anotherBootGoesBackToTheCheckpoint() throws {
        try withTemporaryDirectory { root in
            let path = root + "/store"
            let digest = try Self.killed(path, boot: "boot-a")
            try Self.expectReplayed(path, boot: "boot-b", digest: digest)
        }
    }

    /// A foliod killed while it flushed data.mdb may have been told of a failed write-back that
    /// no later flush hears of: the marker says `dirty` for the whole flush.
    @Test func aFlushCutShortGoesBackToTheCheckpoint() throws {
        try withTemporaryDirectory { root in
            let path = root + "/store"
            let digest = try Self.killed(path, boot: "boot-a")
            try ResumeMarker(directory: path, bootID: "boot-a").clear()
            try Self.expectReplayed(path, boot: "boot-a", digest: digest)
        }
    }

    /// A copy of the data directory (its marker too) is another data.mdb: read while a foliod ran,
    /// its last commit could be torn, and only the checkpoint and journal can tell.
    @Test func aCopyOfTheStoreGoesBackToTheCheckpoint() throws {
        try withTemporaryDirectory { root in
            let digest = try Self.killed(root + "/store", boot: "boot-a")
            try FileManager.default.createDirectory(atPath: root + "/copy", withIntermediateDirectories: true)
            for name in JournalTests.files + [ResumeMarker.fileName] {
                try FileManager.default.copyItem(atPath: root + "/store/" + name, toPath: root + "/copy/" + name)
            }
            try Self.expectReplayed(root + "/copy", boot: "boot-a", digest: digest)
        }
    }

    /// Without a boot id nothing can tell a crash of foliod from one of the machine.
    @Test func withoutABootIDAStartAlwaysGoesBackToTheCheckpoint() throws {
        try withTemporaryDirectory { root in
            let path = root + "/store"
            let digest = try Self.killed(path, boot: nil)
            #expect(!FileManager.default.fileExists(atPath: path + "/" + ResumeMarker.fileName))
            try Self.expectReplayed(path, boot: nil, digest: digest)
        }
    }

    /// The marker is `dirty` from the start of a flush to its success, `clean` after it, and says
    /// which boot, store format and file it speaks for.
    @Test func theMarkerSpansEveryFlushOfDataMDB() throws {
        try withTemporaryDirectory { root in
            let path = root + "/store"
            let store = try Self.journaled(path, boot: "boot-a")
            defer { store.close() }
            let marker = ResumeMarker(directory: path, bootID: "boot-a")
            let line = { (try? String(contentsOfFile: path + "/" + ResumeMarker.fileName, encoding: .utf8)) ?? "" }
            let identity = try #require(store.environment.dataFileIdentity)
            #expect(
                line().hasPrefix(
                    "clean boot=boot-a format=\(StoreDatabases.formatVersion) dev=\(identity.device) ino=\(identity.inode) born="
                ))
            #expect(marker.allowsResuming(path))
            try marker.clear()
            #expect(line().hasPrefix("dirty"))
            #expect(!marker.allowsResuming(path))
            try store.flushData()
            #expect(marker.allowsResuming(path))
            #expect(!ResumeMarker(directory: path, bootID: "boot-b").allowsResuming(path))
            #expect(line().utf8.count == ResumeMarker.lineBytes)
        }
    }

    /// Turning the journal off removes the marker with the journal's other files.
    @Test func turningTheJournalOffRemovesTheMarker() throws {
        try withTemporaryDirectory { root in
            let path = root + "/store"
            let digest = try Self.killed(path, boot: "boot-a")
            var options = Store.Options()
            options.bootID = "boot-a"
            let plain = try Store(directory: path, options: options)
            defer { plain.close() }
            #expect(plain.recovery?.resumed == true)
            #expect(try plain.read { try $0.digest() } == digest)
            for name in [Journal.journalName, Journal.checkpointName, ResumeMarker.fileName] {
                #expect(!FileManager.default.fileExists(atPath: path + "/" + name), "\(name)")
            }
        }
    }
}
