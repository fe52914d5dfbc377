import FolioJSON
import FolioModel
import Testing

@testable import FolioStore

/// Records that refer to files by `{"$file"}`: the reference index answers who refers to a file,
/// the orphan count follows, and both are derived from the log.
@Suite struct FileReferenceTests {
    static let sha256 = String(repeating: "cd", count: 32)

    static func put(_ writer: TestWriter, _ name: String) throws {
        try writer.execute(.putFile(name: name, sha256: sha256, size: 10, contentType: "image/jpeg", replace: true))
    }

    static func file(_ name: String) -> JSON { ["$file": .string(name)] }

    /// Random puts, deletes (forced or not) and records that refer to files from a field, an array
    /// and a nested field, against a model: a delete that is not forced fails exactly when a record
    /// refers to the name, orphans and referrers are the model's, and rebuild and replay give the digest.
    @Test func aRandomWorkloadKeepsReferrersAndOrphansAsAModelDoes() throws {
        try withTemporaryDirectory { root in
            let store = try Store(directory: root + "/store")
            let writer = TestWriter(store)
            var random = SeededGenerator(seed: 7)
            let names = (0..<8).map { "photos/\($0).jpg" }
            var bound = Set<String>()
            var records: [String: [String: Set<String>]] = [:]  // id -> path -> names
            func referrers(of name: String) -> Int {
                records.values.reduce(0) { $0 + $1.values.filter { $0.contains(name) }.count }
            }
            for step in 0..<500 {
                let name = names.randomElement(using: &random)!
                switch Int.random(in: 0..<6, using: &random) {
                case 0, 1:
                    try Self.put(writer, name)
                    bound.insert(name)
                case 2:
                    let force = Bool.random(using: &random)
                    do {
                        try writer.execute(.deleteFile(name: name, force: force))
                        #expect(bound.remove(name) != nil && (force || referrers(of: name) == 0), "step \(step)")
                    } catch StoreError.fileNotFound {
                        #expect(!bound.contains(name), "step \(step)")
                    } catch StoreError.conflict(let conflict) {
                        guard case .fileReferenced(let shown, let count) = conflict.reason else {
                            throw StoreError.conflict(conflict)
                        }
                        #expect(
                            !force && count == referrers(of: name) && !shown.isEmpty,
                            "step \(step): \(conflict.message)")
                        #expect(shown.allSatisfy { records[$0.id]?[$0.path]?.contains(name) == true }, "step \(step)")
                    }
                default:
                    let id = "r\(Int.random(in: 0..<6, using: &random))"
                    if records[id] != nil, Int.random(in: 0..<4, using: &random) == 0 {
                        try writer.execute(.delete(collection: "Report", id: id, ifVersion: nil))
                        records[id] = nil
                        continue
                    }
                    let pick = { (count: Int) in Set((0..<count).map { _ in names.randomElement(using: &random)! }) }
                    let photo = pick(1)
                    let attachments = pick(Int.random(in: 0..<3, using: &random))
                    let thumb = pick(Int.random(in: 0..<2, using: &random))
                    var data: JSONObject = [
                        "photo": Self.file(photo.first!), "attachments": .array(attachments.sorted().map(Self.file)),
                        "note": .string("n\(step)"),
                    ]
                    if records[id] == nil {
                        if let first = thumb.first { data["meta"] = ["thumb": Self.file(first)] }
                        try writer.execute(.create(collection: "Report", id: id, data: data))
                    } else {
                        // A merge patch: null removes the nested reference.
                        data["meta"] = thumb.first.map { ["thumb": Self.file($0)] } ?? .null
                        try writer.execute(.update(collection: "Report", id: id, patch: data, ifVersion: nil))
                    }
                    records[id] = ["photo": photo, "attachments": attachments, "meta.thumb": thumb].filter {
                        !$0.value.isEmpty
                    }
                }
                let orphans = bound.filter { referrers(of: $0) == 0 }
                #expect(try store.read { try $0.fileTotals().orphans } == UInt64(orphans.count), "step \(step)")
            }
            try store.read { snapshot in
                for name in names {
                    let (shown, total) = try snapshot.fileReferrers(name, limit: 3)
                    #expect(total == referrers(of: name) && shown.count == min(3, total), "\(name)")
                }
                var listed: [String] = []
                var after: String?
                repeat {
                    let page = try snapshot.fileOrphans(
                        prefix: "photos/", after: after, createdBy: Timestamp(milliseconds: .max), limit: 2)
                    listed += page.files.map(\.name)
                    after = page.next
                } while after != nil
                #expect(listed == bound.filter { referrers(of: $0) == 0 }.sorted())
                #expect(
                    try snapshot.fileOrphans(prefix: "", after: nil, createdBy: Timestamp(milliseconds: 0), limit: 100)
                        .files.isEmpty)
            }
            try expectVerifyRebuildAndReplayKeepTheDigest(store, root)
        }
    }

    /// The file references are entries of the reference index, derived from the records: one
    /// removed behind the store's back makes verify fail and the file look orphaned, and rebuild
    /// derives it again.
    @Test func theFileReferenceIndexIsDerivedVerifiedAndRebuilt() throws {
        try withTemporaryDirectory { root in
            let store = try Store(directory: root + "/store")
            let writer = TestWriter(store)
            try Self.put(writer, "a.jpg")
            let report = try #require(try writer.create("Report", ["photo": Self.file("a.jpg")], id: "r1"))
            #expect(try store.read { try $0.fileTotals().orphans } == 0)
            let digest = try store.read { try $0.digest() }
            try store.environment.write { lmdb in
                let txn = StoreTransaction(lmdb: lmdb, trees: store.databases.trees, cache: nil)
                let tree = try #require(try store.applier.catalog.referenceTree(txn, creating: false))
                try tree.remove(
                    RefIndex.key(Reference(path: "photo", collection: FileName.collection, id: "a.jpg"), from: report),
                    txn)
            }
            #expect(try store.read { try $0.fileReferrers("a.jpg", limit: 10).total } == 0)
            let damaged = try store.verify(scratchDirectory: root + "/scratch")
            #expect(!damaged.isConsistent)
            #expect(damaged.mismatches.contains { $0.description.contains("reference index") }, "\(damaged.mismatches)")
            try store.rebuild()
            #expect(try store.read { try $0.digest() } == digest)
            #expect(
                try store.read { try $0.fileReferrers("a.jpg", limit: 10).referrers } == [
                    Referrer(collection: "Report", id: "r1", path: "photo")
                ])
            #expect(
                try store.verify(scratchDirectory: root + "/scratch").mismatches.isEmpty,
                "the index again matches the log (the test stores no contents)")
        }
    }

    @Test func badFileValuesAndSchemaTypeFile() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            for (value, fragment) in [
                (JSON.object(["$file": ""]), "1 to 256 bytes"), (["$file": "/a"], "may not start or end"),
                (["$file": "a//b"], "empty segment"),
                (["$file": "a/../b"], "'..' segment"), (["$file": 3], "$file must be a string"),
                (["$file": "a", "x": 1], "exactly"),
                (["$file": .string(String(repeating: "x", count: 257))], "1 to 256 bytes"),
            ] {
                #expect("\(value)") {
                    _ = try RecordData.validate(data: ["photo": value])
                } throws: { error in
                    (error as? ValidationError)?.message.contains(fragment) == true
                }
            }
            let schema = try Schema(parsing: [
                "collection": "Report", "fields": ["photo": ["type": "file", "required": true]],
            ])
            try writer.execute(.defineSchema(schema))
            let reparsed = try Schema(parsing: schema.json)
            #expect(schema.field(named: "photo")?.type == .file && reparsed == schema)
            #expect(throws: StoreError.self) {
                try writer.execute(.create(collection: "Report", id: nil, data: ["photo": "a.jpg"]))
            }
            #expect(throws: StoreError.self) {
                try writer.execute(.create(collection: "Report", id: nil, data: ["photo": ["$ref": "Report/x"]]))
            }
            _ = try writer.create("Report", ["photo": Self.file("not/bound/yet.jpg")])
            #expect(
                try store.read { try $0.fileTotals().orphans } == 0, "a reference to a name not bound counts no orphan")
            try Self.put(writer, "not/bound/yet.jpg")
            #expect(
                try store.read { try $0.fileTotals() }.orphans == 0,
                "bound after its record: referred to from the start")
        }
    }
}
