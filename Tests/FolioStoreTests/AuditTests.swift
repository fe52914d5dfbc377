import FolioJSON
import FolioModel
import Foundation
import LMDB
import Synchronization
import Testing

@testable import FolioStore

@Suite struct AuditTests {
    /// The store's log as `folio export` writes it: event lines with hashes, then the end line.
    private func exportLines(_ store: Store) throws -> [[UInt8]] {
        try store.read { snapshot in
            var lines: [[UInt8]] = []
            try snapshot.forEachEvent(after: 0, limit: .max) { _, record in
                var writer = JSONWriter()
                try Snapshot.writeEventRecord(record, to: &writer)
                lines.append(writer.bytes)
                return true
            }
            let head = try snapshot.head()
            lines.append(
                JSON.object(["end": true, "lastSeq": .int(Int64(head.sequence)), "chainHead": .string(head.hash.hex)])
                    .serialized())
            return lines
        }
    }

    private func importLines(_ lines: [[UInt8]], into directory: String) throws -> Importer.Summary {
        let remaining = LinesSource(lines)
        return try Importer(directory: directory).run(nextLine: { remaining.next() })
    }

    @Test func timeTravelGivesEveryVersionOfAnObject() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            var random = SeededGenerator(seed: 21)
            var versions: [(sequence: UInt64, timestamp: Timestamp, object: StoredObject)] = []
            let first = try writer.execute(.create(collection: "Report", id: "r1", data: ["n": 0, "tags": ["a"]]))
            versions.append((first.event.sequence, first.event.timestamp, first.object!))
            for step in 1...150 {
                _ = try writer.create("Noise", ["step": .int(Int64(step))])
                var patch: JSONObject = ["n": .int(Int64(step))]
                if Bool.random(using: &random) {
                    patch["tags"] = Bool.random(using: &random) ? .null : ["b", .int(Int64(step))]
                }
                if step % 10 == 0 { patch["nested"] = ["x": .int(Int64(step)), "gone": .null] }
                let applied = try writer.execute(.update(collection: "Report", id: "r1", patch: patch, ifVersion: nil))
                versions.append((applied.event.sequence, applied.event.timestamp, applied.object!))
            }
            let deleted = try writer.execute(.delete(collection: "Report", id: "r1", ifVersion: nil))
            try store.read { snapshot throws in
                #expect(try snapshot.object("Report", "r1", at: .sequence(first.event.sequence - 1)) == nil)
                for (index, version) in versions.enumerated() {
                    #expect(try snapshot.object("Report", "r1", at: .sequence(version.sequence)) == version.object)
                    let nextSequence =
                        index + 1 < versions.count ? versions[index + 1].sequence : deleted.event.sequence
                    #expect(
                        try snapshot.object("Report", "r1", at: .sequence(nextSequence - 1)) == version.object,
                        "between events")
                    #expect(
                        try snapshot.object("Report", "r1", at: .instant(version.timestamp.instant)) == version.object)
                }
                #expect(try snapshot.object("Report", "r1", at: .sequence(deleted.event.sequence)) == nil)
                #expect(try snapshot.object("Report", "r1", at: .instant(Instant(seconds: 0))) == nil)
            }
        }
    }

    /// A log whose chain is intact but whose times go backwards cannot be imported: time travel
    /// finds instants by a binary search of the log.
    @Test func importRefusesTimestampsThatDecrease() throws {
        try withTemporaryDirectory { root in
            let origin = Origin(uid: 1, gid: 1, pid: 1)
            let events = [
                Event(
                    sequence: 1, timestamp: Timestamp(milliseconds: 2000), origin: origin, version: 1,
                    change: .created(collection: "T", id: "a", data: [:])),
                Event(
                    sequence: 2, timestamp: Timestamp(milliseconds: 2000), origin: origin, version: 1,
                    change: .created(collection: "T", id: "b", data: [:])),
                Event(
                    sequence: 3, timestamp: Timestamp(milliseconds: 1999), origin: origin, version: 1,
                    change: .created(collection: "T", id: "c", data: [:])),
            ]
            var chain = ChainHash.genesis
            var lines: [[UInt8]] = []
            for event in events {
                let canonical = event.encoded()
                chain = chain.next(canonical)
                var line = JSONWriter()
                canonical.withUnsafeBytes { EventLog.writeWireForm(canonical: $0, hash: chain, to: &line) }
                lines.append(line.bytes)
            }
            lines.append(JSON.object(["end": true, "lastSeq": 3, "chainHead": .string(chain.hex)]).serialized())
            #expect {
                try importLines(lines, into: root + "/imported")
            } throws: { error in
                guard let error = error as? ImportError else { return false }
                return error.line == 3 && "\(error)".contains("dated before event 2")
            }
            let firstTwo =
                Array(lines.prefix(2)) + [
                    JSON.object([
                        "end": true, "lastSeq": 2,
                        "chainHead": .string(ChainHash.genesis.next(events[0].encoded()).next(events[1].encoded()).hex),
                    ]).serialized()
                ]
            _ = try importLines(firstTwo, into: root + "/fine")
            // A directory named with a trailing slash (as a shell completes it): the store is built
            // beside it, not inside it, and lands in it. (Built inside, it was removed with it.)
            try FileManager.default.createDirectory(atPath: root + "/slashed", withIntermediateDirectories: true)
            let summary = try importLines(firstTwo, into: root + "/slashed/")
            #expect(summary.events == 2)
            #expect(FileManager.default.fileExists(atPath: root + "/slashed/data.mdb"))
        }
    }

    /// An event that does not apply fails the import with its line, however much of the file is
    /// still to be read: until 2026-12-03 the reading thread, stopped while it waited to hand over
    /// its next batch, never said it had finished, and the import waited for it forever.
    @Test(.timeLimit(.minutes(1))) func anImportWhoseEventDoesNotApplyFailsEvenWithMuchLeftToRead() throws {
        try withTemporaryDirectory { root in
            let origin = Origin(uid: 1, gid: 1, pid: 1)
            var chain = ChainHash.genesis
            var lines: [[UInt8]] = []
            let count = Store.replayChunk * 5
            for sequence in 1...count {
                // Event 2 creates the object event 1 created.
                let id = sequence == 2 ? "e1" : "e\(sequence)"
                let event = Event(
                    sequence: UInt64(sequence), timestamp: Timestamp(milliseconds: 2000), origin: origin, version: 1,
                    change: .created(collection: "T", id: id, data: [:]))
                let canonical = event.encoded()
                chain = chain.next(canonical)
                var line = JSONWriter()
                canonical.withUnsafeBytes { EventLog.writeWireForm(canonical: $0, hash: chain, to: &line) }
                lines.append(line.bytes)
            }
            lines.append(
                JSON.object(["end": true, "lastSeq": .int(Int64(count)), "chainHead": .string(chain.hex)]).serialized())
            #expect {
                try importLines(lines, into: root + "/imported")
            } throws: { error in
                guard let error = error as? ImportError else { return false }
                return error.line == 2 && "\(error)".contains("does not apply")
            }
        }
    }

    @Test func rebuildAndImportGiveTheOriginalDigest() throws {
        try withTemporaryDirectory { root in
            let store = try Store(directory: root + "/live")
            var random = SeededGenerator(seed: 31)
            try runRandomWorkload(TestWriter(store), steps: 2000, random: &random)
            let original = try store.read { try $0.digest() }

            let summary = try importLines(try exportLines(store), into: root + "/imported")
            #expect(summary.digest == original)
            let imported = try Store(directory: root + "/imported")
            #expect(try imported.read { try $0.digest() } == original)
            #expect(try store.differences(from: imported) == [])

            try store.rebuild()
            #expect(try store.read { try $0.digest() } == original)
            #expect(try store.verify(scratchDirectory: root + "/scratch").isConsistent)
        }
    }

    @Test func importRejectsDamagedOrTruncatedFilesAndLeavesNothing() throws {
        try withTemporaryDirectory { root in
            let store = try Store(directory: root + "/live")
            let writer = TestWriter(store)
            for index in 0..<30 { _ = try writer.create("Task", ["n": .int(Int64(index))]) }
            let lines = try exportLines(store)

            func expectRefused(_ damaged: [[UInt8]], line: Int, _ comment: Comment) throws {
                #expect(comment) {
                    try importLines(damaged, into: root + "/target")
                } throws: { error in
                    (error as? ImportError)?.line == line
                }
                #expect(!FileManager.default.fileExists(atPath: root + "/target"), "nothing half-built")
                #expect(try FileManager.default.contentsOfDirectory(atPath: root).sorted() == ["live"])
            }
            try expectRefused(Array(lines.prefix(20)), line: 21, "truncated at a line boundary")
            var cut = Array(lines.prefix(20))
            cut[19] = Array(cut[19].prefix(40))
            try expectRefused(cut, line: 20, "truncated inside a line")
            var changed = lines
            changed[12] = Array(
                String(decoding: changed[12], as: UTF8.self).replacingOccurrences(of: "\"n\":12", with: "\"n\":13").utf8
            )
            try expectRefused(changed, line: 13, "an event's data changed")
            var skipped = lines
            skipped.remove(at: 5)
            try expectRefused(skipped, line: 6, "an event missing")
            var garbage = lines
            garbage[3] = Array("{not json".utf8)
            try expectRefused(garbage, line: 4, "not JSON")
            try expectRefused(lines + [Array("{}".utf8)], line: lines.count + 1, "data after the end")

            _ = try importLines(lines, into: root + "/target")
            #expect(throws: StoreError.self) { try importLines(lines, into: root + "/target") }
        }
    }

    @Test func verifyNamesDamageToAViewToCurrentStateAndToTheLog() throws {
        try withTemporaryDirectory { root in
            let store = try Store(directory: root + "/live")
            let writer = TestWriter(store)
            try writer.execute(
                .defineView(
                    try ViewDefinition(
                        name: "byN", collection: "Task", whereJSON: nil, sort: SortOrder(parsing: ["n"]), unique: false)
                ))
            for index in 0..<200 { _ = try writer.create("Task", ["n": .int(Int64(index))], id: "t\(index)") }
            #expect(try store.verify(scratchDirectory: root + "/scratch").isConsistent)

            // A view entry, removed from its leaf behind the tree's back.
            try store.environment.write { lmdb in
                let txn = StoreTransaction(
                    lmdb: lmdb, trees: store.databases.trees, cache: nil, viewOps: store.databases.viewOps)
                let view = try #require(try store.applier.catalog.view("byN", txn))
                try view.tree.merge(txn)  // the entries into the nodes, out of the view's pending ops
                let position = try view.tree.position(atRank: 100, txn)
                var leaf = try view.tree.load(position.leaf, txn)
                leaf.remove(at: position.index)
                var key: [UInt8] = []
                withUnsafeBytes(of: view.tree.id.bigEndian) { key += $0 }
                withUnsafeBytes(of: position.leaf.bigEndian) { key += $0 }
                try lmdb.put(store.databases.trees, key, leaf.bytes)
            }
            // A current-state record with other data.
            try store.environment.write { txn in
                var object = try #require(try store.applier.objects.get("Task", "t42", txn))
                object.data["n"] = 4242
                try txn.put(store.databases.objects, Keys.object("Task", "t42"), ObjectTable.encode(object))
            }
            var report = try store.verify(scratchDirectory: root + "/scratch")
            #expect(!report.isConsistent)
            #expect(report.chainBrokenAt == nil)
            let descriptions = report.mismatches.map(\.description)
            #expect(descriptions.contains { $0.contains("object Task/t42") }, "\(descriptions)")
            #expect(descriptions.contains { $0.contains("view byN") && $0.contains("t100") }, "\(descriptions)")

            // One event in the middle of the log, changed in place.
            try store.environment.write { txn in
                let key = Keys.sequence(120)
                var record = Array(try #require(try txn.get(store.databases.events, key)))
                let text = String(decoding: record[ChainHash.size...], as: UTF8.self).replacingOccurrences(
                    of: "\"n\":118", with: "\"n\":999")
                record = Array(record[..<ChainHash.size]) + Array(text.utf8)
                try txn.put(store.databases.events, key, record)
            }
            report = try store.verify(scratchDirectory: root + "/scratch")
            #expect(report.chainBrokenAt == 120)
            #expect(!FileManager.default.fileExists(atPath: root + "/scratch"), "the scratch store is removed")
        }
    }

    @Test func aBackupTakenDuringWritesOpensAndVerifies() throws {
        try withTemporaryDirectory { root in
            let store = try Store(directory: root + "/live")
            let writer = TestWriter(store)
            try writer.execute(
                .defineView(
                    try ViewDefinition(
                        name: "byN", collection: "Task", whereJSON: nil, sort: SortOrder(parsing: ["-n"]), unique: false
                    )))
            let writing = Thread {
                for index in 0..<3000 { _ = try? writer.create("Task", ["n": .int(Int64(index % 17))]) }
            }
            writing.start()
            usleep(100_000)
            let copy = try store.backup(to: root + "/backup")
            while writing.isExecuting { usleep(10_000) }
            #expect(copy.lastSequence > 0)
            let restored = try Store(directory: root + "/backup")
            #expect(try restored.read { try $0.head().sequence } == copy.lastSequence)
            #expect(try restored.read { try $0.digest() } == copy.digest)
            #expect(try restored.verify(scratchDirectory: root + "/scratch").isConsistent)
            #expect(throws: StoreError.self) { try store.backup(to: root + "/backup") }

            // Two backups into one empty directory at once: one is taken, the other finds it taken.
            try FileManager.default.createDirectory(atPath: root + "/shared", withIntermediateDirectories: true)
            let outcomes = Mutex<[Result<Store.CopySummary, any Error>]>([])
            let racers = (0..<2).map { _ in
                Thread { outcomes.withLock { $0.append(Result { try store.backup(to: root + "/shared") }) } }
            }
            for racer in racers { racer.start() }
            while outcomes.withLock({ $0.count }) < 2 { usleep(10_000) }
            let taken = outcomes.withLock { $0.compactMap { try? $0.get() } }
            #expect(taken.count == 1, "\(outcomes.withLock { $0 })")
            let shared = try Store(directory: root + "/shared")
            #expect(try shared.read { try $0.digest() } == taken.first?.digest)
        }
    }

    /// A store that outgrew the map it is opened with (the daemon's doubles as it fills, and LMDB
    /// opens a larger store with a map just the size of its data) is verified, rebuilt and imported
    /// in maps that grow too: verify's scratch store filled its map (`MDB_MAP_FULL`) at 1,350,000
    /// events with ten views (`make bench-replay`), and an import or rebuild could fill theirs.
    @Test func aStoreLargerThanItsMapIsVerifiedRebuiltAndImported() throws {
        try withTemporaryDirectory { root in
            var options = Store.Options()
            options.mapSize = 1 << 20
            var store = try Store(directory: root + "/live", options: options)
            let writer = TestWriter(store)
            for (name, sort) in [("byN", ["n"]), ("byTitle", ["title"]), ("byNDown", ["-n", "title"])]
                as [(String, JSON)]
            {
                try writer.execute(
                    .defineView(
                        try ViewDefinition(
                            name: name, collection: "Task", whereJSON: nil, sort: SortOrder(parsing: sort),
                            unique: false)))
            }
            let padding = String(repeating: "p", count: 300)
            for index in 0..<3000 {
                let data: JSON = ["n": .int(Int64(index % 97)), "title": .string("task \(index) \(padding)")]
                _ = try store.growingMap { try writer.create("Task", data) }
            }
            let digest = try store.read { try $0.digest() }
            let used = try store.read { _ in store.environment.info.mapSize }
            #expect(used >= 4 << 20, "the store grew its map to \(used) bytes")

            // Verify's scratch store starts in the store's first map (1 MiB) and must grow.
            let report = try store.verify(scratchDirectory: root + "/scratch")
            #expect(report.isConsistent, "\(report.mismatches)")
            #expect(report.digest == digest)
            let lines = try exportLines(store)
            store.close()

            // Opened again with 1 MiB, LMDB maps just the data; the rebuild grows it as it needs.
            store = try Store(directory: root + "/live", options: options)
            try store.rebuild()
            #expect(try store.read { try $0.digest() } == digest)
            #expect(try store.verify(scratchDirectory: root + "/scratch").isConsistent)
            store.close()

            // An import into a first map of 1 MiB.
            let remaining = LinesSource(lines)
            let summary = try Importer(directory: root + "/imported", mapSize: 1 << 20).run(nextLine: {
                remaining.next()
            })
            #expect(summary.digest == digest)
        }
    }
}

/// Lines handed out one by one, to the importer's reading thread.
final class LinesSource: @unchecked Sendable {
    private var lines: IndexingIterator<[[UInt8]]>

    init(_ lines: [[UInt8]]) { self.lines = lines.makeIterator() }

    func next() -> [UInt8]? { lines.next() }
}
