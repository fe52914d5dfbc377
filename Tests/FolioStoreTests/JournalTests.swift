import CFolioSystem
import FolioJSON
import FolioModel
import Foundation
import Glibc
import Synchronization
import Testing

@testable import FolioStore

/// The journal (docs/DURABILITY.md): commits that LMDB did not sync are recovered from it, after
/// a crash of the process and after an OS crash that kept any subset of the pages written since
/// the last checkpoint.
@Suite struct JournalTests {
    static func journaled(_ path: String, size: Int = 1 << 20, direct: Bool = true) throws -> Store {
        var options = Store.Options()
        options.journal = true
        options.journalSize = size
        options.journalDirectWrites = direct
        return try Store(directory: path, options: options)
    }

    /// A write and its record in the journal. (The server hands the record to the journal's thread
    /// just before the commit; here, on one thread, it is appended after: the same bytes, and a
    /// checkpoint made by the append, which pins the last commit, cannot wait for this thread's
    /// own transaction.)
    @discardableResult
    static func write(_ writer: TestWriter, _ command: Command, journal: Bool = true) throws -> WriteOutcome {
        let outcome = try writer.write(command)
        if journal { try writer.store.journal!.append([.events(outcome.appended)]) }
        return outcome
    }

    static func create(_ writer: TestWriter, _ index: Int, journal: Bool = true) throws {
        try write(
            writer,
            .create(
                collection: "Task", id: nil,
                data: ["title": .string("task \(index)"), "rank": .int(Int64(index * 7919 % 1000))]),
            journal: journal)
    }

    /// A journaled store at `path` with ten creates, checkpointed.
    static func checkpointedAfterTen(_ path: String) throws -> (Store, TestWriter, Journal) {
        let store = try journaled(path)
        let writer = TestWriter(store)
        for index in 0..<10 { try create(writer, index) }
        try store.journal!.checkpoint()
        return (store, writer, store.journal!)
    }

    static let files = ["data.mdb", Journal.journalName, Journal.checkpointName]

    /// What the disk would hold if the machine stopped now: `durable` (data.mdb as the last
    /// checkpoint flushed it), with each page that differs in the live file taken from the live
    /// file or not, as `keep` decides; the journal and the checkpoint as they are (both are synced
    /// before anything depends on them).
    static func crashImage(of live: String, durable: [UInt8], into target: String, keep: (Int) -> Bool) throws {
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        let current = try [UInt8](Data(contentsOf: URL(fileURLWithPath: live + "/data.mdb")))
        var image = durable
        if image.count < current.count { image += [UInt8](repeating: 0, count: current.count - image.count) }
        let page = 4096
        for index in 0..<(current.count / page) {
            let range = (index * page)..<((index + 1) * page)
            if image[range] != current[range] && keep(index) { image.replaceSubrange(range, with: current[range]) }
        }
        try Data(image).write(to: URL(fileURLWithPath: target + "/data.mdb"))
        for name in [Journal.journalName, Journal.checkpointName] {
            try FileManager.default.copyItem(atPath: live + "/" + name, toPath: target + "/" + name)
        }
    }

    static func copyAsIs(_ live: String, into target: String) throws {
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        for name in files { try FileManager.default.copyItem(atPath: live + "/" + name, toPath: target + "/" + name) }
    }

    @Test func aKilledProcessLosesNoJournaledWrite() throws {
        try withTemporaryDirectory { root in
            let store = try Self.journaled(root + "/live")
            let writer = TestWriter(store)
            _ = try Self.write(
                writer,
                .defineView(
                    try ViewDefinition(
                        name: "byRank", collection: "Task", whereJSON: nil, sort: SortOrder(parsing: ["rank"]),
                        unique: false)))
            for index in 0..<50 { try Self.create(writer, index) }
            try store.journal!.checkpoint()
            for index in 50..<120 { try Self.create(writer, index) }
            let digest = try store.read { try $0.digest() }
            // The page cache as a kill -9 leaves it: every commit's pages, the newest meta page.
            try Self.copyAsIs(root + "/live", into: root + "/killed")
            let reopened = try Self.journaled(root + "/killed")
            defer { reopened.close() }
            #expect(reopened.recovery?.checkpointSequence == 51)
            #expect(reopened.recovery?.sequence == 121)
            #expect(reopened.recovery?.records == 70)
            #expect(try reopened.read { try $0.digest() } == digest)
            try expectVerifyRebuildAndReplayKeepTheDigest(reopened, root)
            store.close()
        }
    }

    /// The heart of the design: after an OS crash data.mdb may hold any subset of the pages
    /// written since the last checkpoint, including a newer meta page whose pages never arrived.
    /// Recovery must come back to exactly the journaled state every time.
    @Test(arguments: 0..<6)
    func anOSCrashKeepingAnySubsetOfUnsyncedPagesRecoversTheJournaledState(seed: Int) throws {
        try withTemporaryDirectory { root in
            let store = try Self.journaled(root + "/live", size: 256 << 10)
            defer { store.close() }
            let writer = TestWriter(store)
            for (name, sort) in [("byRank", "rank"), ("byTitle", "-title")] {
                _ = try Self.write(
                    writer,
                    .defineView(
                        try ViewDefinition(
                            name: name, collection: "Task", whereJSON: nil, sort: SortOrder(parsing: [.string(sort)]),
                            unique: false)))
            }
            var random = SeededGenerator(seed: UInt64(seed + 1))
            var durable = [UInt8]()
            var created = 0
            for round in 0..<6 {
                // Some rounds end with a checkpoint: data.mdb is then durable as it is.
                for _ in 0..<(20 + Int(random.next() % 60)) {
                    try Self.create(writer, created)
                    created += 1
                }
                if round % 2 == 0 || durable.isEmpty {
                    try store.journal!.checkpoint()
                    durable = try [UInt8](Data(contentsOf: URL(fileURLWithPath: root + "/live/data.mdb")))
                }
            }
            // A commit that was never journaled (never answered): it may or may not survive in
            // LMDB's pages, and must not come back.
            let digest = try store.read { try $0.digest() }
            let head = try store.read { try $0.head() }
            try Self.create(writer, created, journal: false)
            for trial in 0..<4 {
                let target = root + "/crash-\(trial)"
                let choice = random.next()
                try Self.crashImage(of: root + "/live", durable: durable, into: target) { page in
                    switch trial {
                    case 0: return false  // nothing after the checkpoint arrived
                    case 1: return true  // everything arrived, the unjournaled commit too
                    case 2: return page < 2  // only the newest meta page arrived
                    default: return (UInt64(page) &* 0x9E37_79B9_7F4A_7C15 ^ choice) % 3 == 0
                    }
                }
                let recovered = try Self.journaled(target, size: 256 << 10)
                #expect(try recovered.read { try $0.head() } == head, "trial \(trial)")
                #expect(try recovered.read { try $0.digest() } == digest, "trial \(trial)")
                let report = try recovered.verify(scratchDirectory: target + "/scratch")
                #expect(
                    report.chainBrokenAt == nil && report.mismatches.isEmpty, "trial \(trial): \(report.mismatches)")
                recovered.close()
            }
        }
    }

    /// A record cut short (its sync never happened, so nobody was answered) ends the replay there,
    /// and what follows in the file is never read as a record.
    @Test func aTornRecordEndsTheReplay() throws {
        try withTemporaryDirectory { root in
            let store = try Self.journaled(root + "/live")
            let writer = TestWriter(store)
            for index in 0..<10 { try Self.create(writer, index) }
            try store.journal!.checkpoint()
            for index in 10..<20 { try Self.create(writer, index) }
            let digest = try store.read { try $0.digest() }
            let head = try store.read { try $0.head() }
            // The next record: written, then torn in its last bytes.
            let end = store.journal!.liveBytes
            try Self.create(writer, 20)
            try Self.create(writer, 21)
            store.close()
            try Self.copyAsIs(root + "/live", into: root + "/torn")
            let checkpoint = try #require(try CheckpointFile.read(root + "/torn/" + Journal.checkpointName))
            let file = try FileHandle(forUpdating: URL(fileURLWithPath: root + "/torn/" + Journal.journalName))
            let size = UInt64(1 << 20)
            // The first of the two records after `head`, cut short.
            try file.seek(toOffset: (checkpoint.journalStart + UInt64(end)) % size + 40)
            file.write(Data(repeating: 0xEE, count: 16))
            try file.close()
            let reopened = try Self.journaled(root + "/torn")
            defer { reopened.close() }
            #expect(try reopened.read { try $0.head() } == head)
            #expect(try reopened.read { try $0.digest() } == digest)
        }
    }

    /// A commit that fails after its record reached the journal (the server writes the record while
    /// LMDB commits) is followed by a cancel, and the next commit reuses its sequences: recovery
    /// skips the cancelled record and applies the one after. A record whose cancel never reached
    /// the disk is applied (none of its writes was answered: their failure waited for the cancel).
    @Test func aCancelledRecordIsNotReplayed() throws {
        struct CommitFailed: Error {}
        try withTemporaryDirectory { root in
            let (store, writer, journal) = try Self.checkpointedAfterTen(root + "/live")
            for index in 10..<15 { try Self.create(writer, index) }
            let head = try store.read { try $0.head() }
            // Two failed commits in a row, each cancelled, then one that commits with the same
            // sequence; then one more failure whose cancel is lost.
            var failed: [UInt64] = []
            for index in 0..<2 {
                #expect(throws: CommitFailed.self) {
                    try writer.write(
                        .create(collection: "Task", id: nil, data: ["title": .string("never committed \(index)")])
                    ) { outcome in
                        try journal.append([.events(outcome.appended)])
                        failed.append(outcome.appended[0].event.sequence)
                        throw CommitFailed()
                    }
                }
                try journal.append([.cancel(firstSequence: failed.last!)])
            }
            #expect(failed == [head.sequence + 1, head.sequence + 1])
            try Self.create(writer, 15)
            try Self.create(writer, 16)
            let digest = try store.read { try $0.digest() }
            let sequence = try store.read { try $0.head() }.sequence
            #expect(sequence == head.sequence + 2)
            try Self.copyAsIs(root + "/live", into: root + "/killed")
            #expect(throws: CommitFailed.self) {
                try writer.write(.create(collection: "Task", id: nil, data: ["title": .string("in doubt")])) {
                    outcome in
                    try journal.append([.events(outcome.appended)])
                    throw CommitFailed()
                }
            }
            try Self.copyAsIs(root + "/live", into: root + "/doubt")
            store.close()

            let reopened = try Self.journaled(root + "/killed")
            #expect(reopened.recovery?.sequence == sequence)
            #expect(reopened.recovery?.records == 7, "five creates before, two after; the cancelled records skipped")
            #expect(reopened.recovery?.cancelled == 2)
            #expect(try reopened.read { try $0.digest() } == digest)
            try expectVerifyRebuildAndReplayKeepTheDigest(reopened, root)
            reopened.close()

            // The last failed commit's record, without its cancel: applied, as an unanswered write
            // may be, after the two that committed.
            let doubt = try Self.journaled(root + "/doubt")
            defer { doubt.close() }
            #expect(doubt.recovery?.sequence == sequence + 1)
            #expect(try doubt.read { try $0.head() }.sequence == sequence + 1)
        }
    }

    /// A checkpoint notes where the journal's records begin, then pins the last commit. A record
    /// placed in between whose commit failed, cancelled, and a commit of fewer events with the
    /// same first sequence, leave the checkpoint's start before a cancelled record that neither
    /// follows the checkpoint's head nor lies before it: recovery skips it for its cancel and goes
    /// on. (It stopped there, and every acknowledged write after it was lost to an OS crash.)
    @Test func aCancelledRecordAcrossTheCheckpointsHeadIsSkipped() throws {
        struct CommitFailed: Error {}
        try withTemporaryDirectory { root in
            let (store, writer, journal) = try Self.checkpointedAfterTen(root + "/live")
            let checkpointPath = root + "/live/" + Journal.checkpointName
            let before = try #require(try CheckpointFile.read(checkpointPath))
            // Where the checkpoint below would have started, had it noted it before these writes.
            let start = before.journalStart + UInt64(journal.liveBytes)
            let three = (0..<3).map {
                BatchOperation(
                    command: .create(collection: "Task", id: nil, data: ["title": .string("never \($0)")]),
                    idResult: nil, hasResultValues: false)
            }
            var failed: UInt64 = 0
            #expect(throws: CommitFailed.self) {
                try writer.write(.batch(three, atomic: true)) { outcome in
                    #expect(outcome.appended.count == 3)
                    try journal.append([.events(outcome.appended)])
                    failed = outcome.appended[0].event.sequence
                    throw CommitFailed()
                }
            }
            try journal.append([.cancel(firstSequence: failed)])
            try Self.create(writer, 10)
            try journal.checkpoint()
            let pinned = try #require(try CheckpointFile.read(checkpointPath))
            #expect(pinned.sequence == failed, "the checkpoint's head: the one create that took the sequence")
            for index in 11..<15 { try Self.create(writer, index) }
            let digest = try store.read { try $0.digest() }
            let head = try store.read { try $0.head() }
            try Self.copyAsIs(root + "/live", into: root + "/killed")
            store.close()
            // The same checkpoint, starting where it would have, before the cancelled record.
            let moved = CheckpointFile(path: root + "/killed/" + Journal.checkpointName)
            var early = pinned
            early.generation += 1
            early.journalStart = start
            try moved.write(early, directory: root + "/killed")

            let reopened = try Self.journaled(root + "/killed")
            defer { reopened.close() }
            #expect(reopened.recovery?.checkpointSequence == failed)
            #expect(reopened.recovery?.sequence == head.sequence, "\(String(describing: reopened.recovery))")
            #expect(try reopened.read { try $0.head() } == head)
            #expect(try reopened.read { try $0.digest() } == digest)
        }
    }

    /// A ring much smaller than the writes: records wrap around many times, checkpoints run when it
    /// is a quarter full, and a batch larger than half the ring is made durable by a checkpoint.
    /// Written directly and through the page cache (tmpfs, or `FOLIO_JOURNAL_DIRECT=0`).
    @Test(arguments: [true, false])
    func theRingWrapsAndOverflowsIntoCheckpoints(direct: Bool) throws {
        try withTemporaryDirectory { root in
            let store = try Self.journaled(root + "/live", size: 1 << 20, direct: direct)
            let writer = TestWriter(store)
            let journal = store.journal!
            let started = journal.checkpointCount
            var created = 0
            // As the checkpointer does: a checkpoint whenever a quarter of the ring is in use.
            for _ in 0..<100 {
                for _ in 0..<60 {
                    try Self.create(writer, created)
                    created += 1
                }
                if journal.wantsCheckpoint(interval: .max) { try journal.checkpoint() }
            }
            #expect(journal.checkpointCount > started + 5)
            // No checkpointer: the ring fills, and appending makes room with a checkpoint of its own.
            let unattended = journal.checkpointCount
            for _ in 0..<8000 {
                try Self.create(writer, created)
                created += 1
            }
            #expect(journal.checkpointCount > unattended)
            #expect(journal.liveBytes <= journal.size)
            // One batch of 1,000 creates with long titles: over half a MiB of events.
            let long = String(repeating: "x", count: 600)
            let operations = (0..<1000).map { index in
                BatchOperation(
                    command: .create(collection: "Task", id: nil, data: ["title": .string(long + "\(index)")]),
                    idResult: nil, hasResultValues: false)
            }
            let before = journal.checkpointCount
            try Self.write(writer, .batch(operations, atomic: true))
            #expect(journal.checkpointCount == before + 1, "the batch was made durable by a checkpoint")
            for index in 0..<5 { try Self.create(writer, created + index) }
            let digest = try store.read { try $0.digest() }
            try Self.copyAsIs(root + "/live", into: root + "/killed")
            store.close()
            let reopened = try Self.journaled(root + "/killed", size: 1 << 20, direct: direct)
            defer { reopened.close() }
            #expect(try reopened.read { try $0.digest() } == digest)
            #expect(reopened.recovery?.records == 5)
        }
    }

    /// The checkpointer asks whether a checkpoint is due while appends make room with checkpoints
    /// of their own: asking must not fail while another thread's checkpoint ends (it once read the
    /// clock, waited for that checkpoint's lock, and subtracted the later time: an overflow, which
    /// stopped foliod in a storm of large writes).
    @Test func askingForACheckpointWhileAnotherEndsIsSafe() throws {
        try withTemporaryDirectory { root in
            let store = try Self.journaled(root + "/live", size: 1 << 20)
            defer { store.close() }
            let writer = TestWriter(store)
            let journal = store.journal!
            try Self.create(writer, 0)
            let done = Atomic(false)
            let asked = Atomic(0)
            let asker = Thread {
                while !done.load(ordering: .relaxed) {
                    _ = journal.wantsCheckpoint(interval: 1)
                    asked.add(1, ordering: .relaxed)
                }
            }
            asker.start()
            let before = journal.checkpointCount
            for index in 1...200 {
                try Self.create(writer, index)
                try journal.checkpoint()
            }
            done.store(true, ordering: .relaxed)
            while !asker.isFinished { usleep(1000) }
            #expect(journal.checkpointCount == before + 200)
            #expect(asked.load(ordering: .relaxed) > 0)
        }
    }

    /// Opening without the journal applies it, flushes data.mdb, and removes both files.
    @Test func turningTheJournalOffAppliesItAndRemovesIt() throws {
        try withTemporaryDirectory { root in
            let store = try Self.journaled(root + "/live")
            let writer = TestWriter(store)
            for index in 0..<30 { try Self.create(writer, index) }
            let digest = try store.read { try $0.digest() }
            try Self.copyAsIs(root + "/live", into: root + "/off")
            store.close()
            let plain = try Store(directory: root + "/off")
            #expect(plain.journal == nil)
            #expect(plain.recovery?.sequence == 30)
            #expect(try plain.read { try $0.digest() } == digest)
            for name in [Journal.journalName, Journal.checkpointName] {
                #expect(!FileManager.default.fileExists(atPath: root + "/off/" + name))
            }
            plain.close()
            let again = try Store(directory: root + "/off")
            defer { again.close() }
            #expect(again.recovery == nil)
            #expect(try again.read { try $0.digest() } == digest)
        }
    }

    /// Whether files in the tests' temporary directory can be opened with `O_DIRECT` (tmpfs cannot).
    static let directWritesWork: Bool = {
        let path = NSTemporaryDirectory() + "folio-direct-probe-" + UUID().uuidString
        guard FileManager.default.createFile(atPath: path, contents: Data(count: 4096)) else { return false }
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = folio_open_direct_write(path)
        if file >= 0 { close(file) }
        return file >= 0
    }()

    /// Records written around the page cache: whole blocks, the bytes before a record in its first
    /// block as they were (kept from the last write, or read back by a ring opened anew), zeros
    /// after it to its last block's end, nothing beyond that block.
    @Test(.enabled(if: directWritesWork)) func directWritesKeepTheBytesBeforeARecordAndOnlyZeroItsLastBlock() throws {
        try withTemporaryDirectory { root in
            let path = root + "/" + Journal.journalName
            let size = 64 << 10
            let ring = try JournalRing.open(path, size: size, directory: root, direct: true)
            #expect(ring.direct != nil)
            // A pattern where nothing was written, to see what a write leaves alone.
            var expected = [UInt8](repeating: 0xAB, count: size)
            try expected.withUnsafeBytes { try writeFully(ring.file, $0, at: 0, path: path) }
            var random = SeededGenerator(seed: 7)
            var position = 0
            func append(_ count: Int, _ ring: JournalRing) throws {
                let bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next() | 1) }
                try bytes.withUnsafeBytes { try ring.write($0, at: UInt64(position)) }
                expected.replaceSubrange(position..<(position + count), with: bytes)
                let end = position + count
                let blockEnd = (end + 4095) / 4096 * 4096
                expected.replaceSubrange(end..<blockEnd, with: repeatElement(0, count: blockEnd - end))
                #expect(Int(ring.writtenEnd(UInt64(end))) == blockEnd)
                position = end
            }
            // Within a block, across blocks, ending on a block's end, starting on one.
            for count in [100, 5000, 10, 4096 * 3 - 5110, 300, 9000] { try append(count, ring) }
            ring.close()
            // A ring opened anew has no block in memory: it reads the one it writes into.
            let again = try JournalRing.open(path, size: size, directory: root, direct: true)
            try append(777, again)
            again.close()
            let stored = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
            #expect(stored.count == size)
            if let first = (0..<size).first(where: { stored[$0] != expected[$0] }) {
                Issue.record("the ring differs from what was written at byte \(first) (written up to \(position))")
            }
        }
    }

    /// A new ring's size is rounded up to whole 4 KiB blocks, so that its records can be written
    /// directly whatever size was asked for.
    @Test func aNewRingIsWholeBlocks() throws {
        try withTemporaryDirectory { root in
            let ring = try JournalRing.open(
                root + "/" + Journal.journalName, size: (64 << 10) + 100, directory: root, direct: true)
            defer { ring.close() }
            #expect(ring.size == (64 << 10) + 4096)
            let attributes = try FileManager.default.attributesOfItem(atPath: root + "/" + Journal.journalName)
            #expect((attributes[.size] as? NSNumber)?.intValue == (64 << 10) + 4096)
            #expect(ring.direct != nil || !Self.directWritesWork)
        }
    }

    /// A record written directly zeroes the rest of its last block, so its room counts to that
    /// block's end: near a full ring, the oldest live record (in the next lap) can begin in that
    /// block, and zeros over its header would end the replay there, losing every write after the
    /// checkpoint. Each round takes a checkpoint anywhere in the ring, fills the ring with no
    /// checkpointer, then sizes one record to end a few bytes before the oldest live one; an OS
    /// crash then (`data.mdb` as the checkpoint left it, the journal as it is) must restart into
    /// the same state.
    @Test(arguments: [true, false])
    func aFullRingNeverOverwritesItsOldestLiveRecord(direct: Bool) throws {
        try withTemporaryDirectory { root in
            let size = 128 << 10
            let store = try Self.journaled(root + "/live", size: size, direct: direct)
            defer { store.close() }
            let writer = TestWriter(store)
            let journal = store.journal!
            var random = SeededGenerator(seed: 11)
            var created = 0
            /// Creates one object with a title of `length` bytes; returns its record's bytes beyond
            /// the title's, or nil if it took a checkpoint (or skipped to the next lap).
            func create(_ length: Int) throws -> Int? {
                let (before, checkpoints) = (journal.liveBytes, journal.checkpointCount)
                try Self.write(
                    writer,
                    .create(
                        collection: "Task", id: nil,
                        data: ["title": .string(String(repeating: "t", count: length)), "n": .int(Int64(created % 10))])
                )
                created += 1
                let overhead = journal.liveBytes - before - length
                return journal.checkpointCount == checkpoints && overhead < 1000 ? overhead : nil
            }
            var aimed = 0
            for round in 0..<10 {
                for _ in 0..<(1 + Int(random.next() % 40)) { _ = try create(40 + Int(random.next() % 1500)) }
                try journal.checkpoint()
                var durable = try [UInt8](Data(contentsOf: URL(fileURLWithPath: root + "/live/data.mdb")))
                let checkpoints = journal.checkpointCount
                var overhead: Int?
                while size - journal.liveBytes >= 6000 {
                    overhead = try create(40 + Int(random.next() % 1500)) ?? overhead
                }
                guard let overhead, journal.checkpointCount == checkpoints else { continue }
                let free = size - journal.liveBytes
                guard free - overhead - 16 > 40 else { continue }
                _ = try create(free - overhead - 1 - Int(random.next() % 16))
                aimed += 1
                // Its room counted to its block's end, the record may have needed a checkpoint.
                if journal.checkpointCount != checkpoints {
                    durable = try [UInt8](Data(contentsOf: URL(fileURLWithPath: root + "/live/data.mdb")))
                }
                let digest = try store.read { try $0.digest() }
                let target = root + "/image-\(round)"
                // Nothing written after the checkpoint reached data.mdb's file.
                try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
                try Data(durable).write(to: URL(fileURLWithPath: target + "/data.mdb"))
                for name in [Journal.journalName, Journal.checkpointName] {
                    try FileManager.default.copyItem(atPath: root + "/live/" + name, toPath: target + "/" + name)
                }
                let reopened = try Self.journaled(target, size: size, direct: direct)
                #expect(try reopened.read { try $0.digest() } == digest, "round \(round), after \(created) creates")
                reopened.close()
                try FileManager.default.removeItem(atPath: target)
            }
            #expect(aimed >= 5)
        }
    }
}
