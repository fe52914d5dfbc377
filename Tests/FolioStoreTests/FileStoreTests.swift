import FolioJSON
import FolioModel
import Foundation
import Glibc
import Testing

@testable import FolioStore

@Suite struct FileIndexTests {
    struct Bound: Equatable {
        let sha256: String
        let size: UInt64
        let contentType: String
    }

    /// Random puts, replaces and deletes against a dictionary: the index answers as the model
    /// does after every write, lists in name order, and rebuild, verify and replay give its digest.
    @Test func aRandomWorkloadMatchesADictionaryAndRebuildsToTheSameDigest() throws {
        try withTemporaryDirectory { root in
            let store = try Store(directory: root + "/store")
            let writer = TestWriter(store)
            var random = SeededGenerator(seed: 12)
            let contents: [(sha256: String, size: UInt64)] = (0..<6).map { index in
                let hasher = SHA256Hasher()
                hasher.update([UInt8(index)])
                return (hexString(hasher.finalize()), UInt64(index * 1000 + 1))
            }
            let names = (0..<20).map { "dir\($0 % 3)/file-\($0)" }
            var model: [String: Bound] = [:]
            for step in 0..<600 {
                let name = names.randomElement(using: &random)!
                if Int.random(in: 0..<4, using: &random) == 0 {
                    do {
                        try writer.execute(.deleteFile(name: name, force: false))
                        #expect(
                            model.removeValue(forKey: name) != nil,
                            "step \(step): deleted \(name), which the model lacks")
                    } catch StoreError.fileNotFound(let missing) {
                        #expect(missing == name && model[name] == nil, "step \(step)")
                    }
                } else {
                    let content = contents.randomElement(using: &random)!
                    let replace = Bool.random(using: &random)
                    let type = ["image/jpeg", "text/plain"].randomElement(using: &random)!
                    let command = Command.putFile(
                        name: name, sha256: content.sha256, size: content.size, contentType: type, replace: replace)
                    do {
                        let outcome = try writer.write(command)
                        guard case .file(let record) = outcome.result else {
                            Issue.record("step \(step): a put answered \(outcome.result)")
                            continue
                        }
                        #expect(replace || model[name] == nil, "step \(step): bound \(name) again without replace")
                        #expect(
                            record.createdAt == outcome.appended[0].event.timestamp
                                && record.uploader == writer.origin.uid)
                        model[name] = Bound(sha256: content.sha256, size: content.size, contentType: type)
                    } catch StoreError.conflict {
                        #expect(!replace && model[name] != nil, "step \(step)")
                    }
                }
            }
            try store.read { snapshot in
                for name in names {
                    let file = try snapshot.file(name)
                    #expect(
                        file.map { Bound(sha256: $0.sha256, size: $0.size, contentType: $0.contentType) }
                            == model[name], "\(name)")
                }
                var users: [String: UInt64] = [:]
                for bound in model.values { users[bound.sha256, default: 0] += 1 }
                for content in contents {
                    #expect(try snapshot.fileReferences(toBlob: content.sha256) == users[content.sha256] ?? 0)
                }
                let sizes = Dictionary(contents.map { ($0.sha256, $0.size) }) { first, _ in first }
                let expected = FileTotals(
                    files: UInt64(model.count), blobs: UInt64(users.count),
                    storedBytes: users.keys.reduce(0) { $0 + sizes[$1]! },
                    namedBytes: model.values.reduce(0) { $0 + $1.size }, orphans: UInt64(model.count))
                #expect(try snapshot.fileTotals() == expected)
                var listed: [String] = []
                var after: String?
                while true {
                    let page = try snapshot.files(prefix: "", after: after, limit: 7)
                    listed += page.files.map(\.name)
                    guard let next = page.next else { break }
                    after = next
                }
                #expect(listed == model.keys.sorted())
                #expect(
                    try snapshot.files(prefix: "dir1/", after: nil, limit: 1000).files.map(\.name)
                        == model.keys.filter { $0.hasPrefix("dir1/") }.sorted())
            }
            try expectVerifyRebuildAndReplayKeepTheDigest(store, root)
        }
    }

    @Test func aNameIsMadeWhenThePutGivesNone() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            let sha256 = String(repeating: "ab", count: 32)
            let outcome = try writer.write(
                .putFile(name: nil, sha256: sha256, size: 1, contentType: "text/plain", replace: false))
            guard case .file(let record) = outcome.result else {
                Issue.record("\(outcome.result)")
                return
            }
            #expect(record.name.utf8.count == 26)
            guard case .filePut(let binding) = outcome.appended[0].event.change else {
                Issue.record("not a file.put event")
                return
            }
            #expect(binding.name == record.name, "the event records the name the writer made")
        }
    }
}

@Suite struct BlobStoreTests {
    @Test func contentIsStoredOnceAndSweptOnlyWhenUnpinnedUnreferencedAndPastItsGrace() throws {
        try withTemporaryDirectory { root in
            let blobs = BlobStore(directory: root + "/blobs")
            let content = Array("the same photo".utf8)
            let (sha256, size) = try content.withUnsafeBytes { try blobs.store($0) }
            #expect(size == UInt64(content.count))
            let path = blobs.path(of: sha256)
            var before = stat()
            #expect(stat(path, &before) == 0)
            _ = try content.withUnsafeBytes { try blobs.store($0) }
            var after = stat()
            #expect(stat(path, &after) == 0 && after.st_ino == before.st_ino, "stored content is not written again")
            #expect(blobs.storedBlobs() == [sha256])
            #expect(FileManager.default.contents(atPath: path) == Data(content))
            #expect(try blobs.read(sha256, offset: 4, length: 4) == Array("same".utf8))

            // Pinned twice (two puts): no sweep removes it, however long ago it became unreferenced.
            #expect(blobs.sweep(grace: 10, now: 0) { _ in false }.isEmpty)
            #expect(blobs.sweep(grace: 10, now: 100) { _ in false }.isEmpty)
            blobs.unpin(sha256)
            #expect(blobs.sweep(grace: 10, now: 200) { _ in false }.isEmpty, "still pinned once")
            blobs.unpin(sha256)
            #expect(blobs.sweep(grace: 10, now: 300) { _ in true }.isEmpty, "referenced")
            #expect(blobs.sweep(grace: 10, now: 400) { _ in false }.isEmpty, "first seen unreferenced")
            #expect(blobs.sweep(grace: 10, now: 405) { _ in false }.isEmpty, "within its grace")
            #expect(blobs.sweep(grace: 10, now: 411) { _ in false } == [sha256])
            #expect(blobs.storedBlobs().isEmpty && !FileManager.default.fileExists(atPath: path))
        }
    }

    @Test func temporaryFilesAreRemoved() throws {
        try withTemporaryDirectory { root in
            let blobs = BlobStore(directory: root + "/blobs")
            _ = try [UInt8(1)].withUnsafeBytes { try blobs.store($0) }
            for name in ["a", "b"] {
                #expect(FileManager.default.createFile(atPath: root + "/blobs/tmp/" + name, contents: Data([1])))
            }
            #expect(blobs.removeTemporaryFiles() == 2)
            #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/blobs/tmp").isEmpty)
            #expect(blobs.storedBlobs().count == 1)
        }
    }
}
