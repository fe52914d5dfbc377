import FolioJSON
import FolioModel
import Foundation
import LMDB

/// The outcome of a verification: the chain, the replay and every difference found.
public struct VerificationReport: Sendable {
    public struct Mismatch: Sendable, Equatable {
        /// `object`, `view`, `creationOrder`, `references`, `history`, `catalog`, `requestKeys`, `event`, `files`
        public let kind: String
        public let description: String
    }

    /// A content some name refers to that the blob store does not hold intact.
    public struct BadBlob: Sendable, Equatable {
        public let sha256: String
        /// `missing`, `changed` (another hash or size than the index says) or `unreadable`.
        public let problem: String
        public let description: String
        /// The names bound to it, in name order, up to `maxNamesPerBlob`.
        public let names: [String]
        /// How many more names are bound to it than `names` lists.
        public let omittedNames: UInt64
    }

    public static let maxMismatches = 1000
    public static let maxNamesPerBlob = 100

    public var lastSequence: UInt64 = 0
    public var chainHead = ChainHash.genesis
    /// The first sequence at which the stored log is not what the chain says: changed, missing or
    /// out of place.
    public var chainBrokenAt: UInt64?
    public var chainProblem: String?
    public var replayedEvents: UInt64 = 0
    public var digest = ChainHash.genesis
    public var mismatches: [Mismatch] = []
    public var omittedMismatches = 0
    /// Blobs the snapshot's names refer to, each re-hashed from disk, and the bytes hashed.
    public var blobsChecked: UInt64 = 0
    public var blobBytes: UInt64 = 0
    /// Up to `maxMismatches` blobs found missing or changed; `omittedBadBlobs` more.
    public var badBlobs: [BadBlob] = []
    public var omittedBadBlobs = 0

    public var isConsistent: Bool { chainBrokenAt == nil && mismatches.isEmpty && badBlobs.isEmpty }

    mutating func add(_ kind: String, _ description: String) {
        if mismatches.count < Self.maxMismatches {
            mismatches.append(Mismatch(kind: kind, description: description))
        } else {
            omittedMismatches += 1
        }
    }
}

extension Store {
    /// Checks the hash chain, replays the log into a scratch store in `scratchDirectory` (removed
    /// afterwards), compares it with the live state and views, and re-hashes every blob a name
    /// refers to, all from one snapshot, so it can run while writers go on. Sweeps are held off
    /// meanwhile, so a blob of the snapshot whose names went since is still there to hash.
    public func verify(scratchDirectory: String, progress: (Progress) -> Void = { _ in }) throws -> VerificationReport {
        try blobs.holdingSweeps {
            try read { snapshot in
                var scratchOptions = Options()
                scratchOptions.sync = .noSync
                // The map the store was opened with, grown as the replay fills it (`growingMap`).
                scratchOptions.mapSize = options.mapSize
                scratchOptions.requestKeyRetention = options.requestKeyRetention
                let scratch: Store
                do {
                    scratch = try Store(directory: scratchDirectory, options: scratchOptions)
                } catch {
                    // A full disk can fail it after the directory was made.
                    try? FileManager.default.removeItem(atPath: scratchDirectory)
                    throw error
                }
                defer {
                    scratch.close()
                    try? FileManager.default.removeItem(atPath: scratchDirectory)
                }
                var verifier = Verifier(live: snapshot, scratch: scratch)
                try verifier.replay(progress: progress)
                try scratch.read { replayed in try verifier.compare(with: replayed) }
                try verifier.checkBlobs(in: blobs)
                verifier.report.digest = try snapshot.digest()
                return verifier.report
            }
        }
    }
}

/// Replays a snapshot's log into a scratch store and lists where the snapshot's derived state differs.
struct Verifier {
    let live: Snapshot
    let scratch: Store
    var report = VerificationReport()

    init(live: Snapshot, scratch: Store) {
        self.live = live
        self.scratch = scratch
    }

    /// Reads the log in order, checking sequence and chain, and applies each event to the scratch store;
    /// reading and decoding (on a thread of its own) overlaps with applying.
    mutating func replay(progress: (Store.Progress) -> Void) throws {
        let head = try live.head()
        report.lastSequence = head.sequence
        report.chainHead = head.hash
        let reader = CheckedLogReader(live: live, last: head.sequence)
        struct StopReplay: Error {}
        do {
            try runPipelined(
                produce: { try reader.next() },
                consume: { batch in
                    try scratch.growingMap {
                        try scratch.write { writer in
                            // By index, not taken apart into a copied tuple (see `Store.rebuild`).
                            for index in batch.indices {
                                do {
                                    _ = try writer.append(batch[index].event, isolated: false)
                                } catch let error as StoreError {
                                    let sequence = batch[index].event.sequence
                                    reader.mismatches.append(
                                        .init(
                                            kind: "event",
                                            description:
                                                "event \(sequence) does not apply, replay stops there: \(error)"))
                                    throw StopReplay()
                                }
                            }
                        }
                    }
                    report.replayedEvents = batch.last?.event.sequence ?? report.replayedEvents
                    progress(Store.Progress(done: report.replayedEvents, total: head.sequence))
                })
        } catch is StopReplay {}
        if let broken = reader.brokenAt { breakChain(at: broken, reader.problem ?? "") }
        for mismatch in reader.mismatches { report.add(mismatch.kind, mismatch.description) }
    }

    private mutating func breakChain(at sequence: UInt64, _ problem: String) {
        report.chainBrokenAt = sequence
        report.chainProblem = problem
    }

    mutating func compare(with replayed: Snapshot) throws {
        try compareObjects(replayed)
        try compareTrees(replayed)
        let liveDatabases = live.store.databases
        let replayedDatabases = replayed.store.databases
        var raw: [StoreDifference] = []
        try Store.compare(
            liveDatabases.catalog, live.txn, replayedDatabases.catalog, replayed.txn, limit: 100, into: &raw)
        for difference in raw {
            report.add(
                "catalog",
                "catalog entry \(String(decoding: difference.key.map { $0 == 0 ? UInt8(ascii: "/") : $0 }, as: UTF8.self)) \(side(difference))"
            )
        }
        raw = []
        try Store.compare(liveDatabases.files, live.txn, replayedDatabases.files, replayed.txn, limit: 100, into: &raw)
        for difference in raw {
            let key = difference.key
            let entry: String
            switch key.first {
            case UInt8(ascii: "n"): entry = "for name " + String(decoding: key.dropFirst(), as: UTF8.self)
            case UInt8(ascii: "b"): entry = "for content " + hexString(key.dropFirst())
            default: entry = "of the totals"
            }
            report.add("files", "file index entry \(entry) \(side(difference))")
        }
        raw = []
        try Store.compare(
            liveDatabases.requests, live.txn, replayedDatabases.requests, replayed.txn, limit: 100, into: &raw)
        for difference in raw {
            report.add(
                "requestKeys",
                "request key entry \(String(decoding: difference.key.dropFirst().map { $0 < 0x20 || $0 > 0x7E ? UInt8(ascii: ".") : $0 }, as: UTF8.self)) \(side(difference))"
            )
        }
    }

    /// Re-hashes, in pieces, every blob the snapshot's names refer to, and names the files bound to
    /// each one that is missing or changed.
    mutating func checkBlobs(in blobs: BlobStore) throws {
        var bad: [(sha256: String, problem: String, description: String)] = []
        try live.forEachBlob { sha256, size in
            report.blobsChecked += 1
            switch blobs.hash(sha256) {
            case .missing:
                bad.append(
                    (sha256, "missing", "the content \(sha256) of \(size) bytes is missing from \(blobs.directory)"))
            case .unreadable(let reason):
                bad.append((sha256, "unreadable", "the content \(sha256) cannot be read: \(reason)"))
            case .read(let actual, let actualSize):
                report.blobBytes += actualSize
                if actual != sha256 || actualSize != size {
                    bad.append(
                        (
                            sha256, "changed",
                            "the content \(sha256) of \(size) bytes now holds \(actualSize) bytes hashing to \(actual)"
                        ))
                }
            }
        }
        guard !bad.isEmpty else { return }
        report.omittedBadBlobs = max(0, bad.count - VerificationReport.maxMismatches)
        bad = Array(bad.prefix(VerificationReport.maxMismatches))
        let names = try live.fileNames(boundTo: Set(bad.map(\.sha256)), limit: VerificationReport.maxNamesPerBlob)
        for blob in bad {
            let listed = names[blob.sha256] ?? []
            let users = try live.fileReferences(toBlob: blob.sha256)
            report.badBlobs.append(
                .init(
                    sha256: blob.sha256, problem: blob.problem, description: blob.description, names: listed,
                    omittedNames: users - min(users, UInt64(listed.count))))
        }
    }

    private func side(_ difference: StoreDifference) -> String {
        switch (difference.left, difference.right) {
        case (nil, _): return "is missing from the live store"
        case (_, nil): return "is in the live store but not in the log"
        default: return "differs from the replayed log"
        }
    }

    private func describeHistoryKey(_ key: [UInt8]) -> String {
        guard key.count > 9 else { return "?" }
        let prefix = key.prefix(key.count - 9)
        let sequence = key.suffix(8).withUnsafeBytes { Keys.sequence(from: UnsafeRawBufferPointer($0)) }
        return describeObjectKey(Array(prefix)) + " at event \(sequence)"
    }

    private func describeObjectKey(_ key: [UInt8]) -> String {
        String(decoding: key.map { $0 == 0 ? UInt8(ascii: "/") : $0 }, as: UTF8.self)
    }

    private mutating func compareObjects(_ replayed: Snapshot) throws {
        var differences: [StoreDifference] = []
        try Store.compare(
            live.store.databases.objects, live.txn, replayed.store.databases.objects, replayed.txn,
            limit: VerificationReport.maxMismatches,
            into: &differences)
        for difference in differences {
            if Keys.isHistory(difference.key) {
                report.add("history", "history entry \(describeHistoryKey(difference.key)) \(side(difference))")
                continue
            }
            let name = describeObjectKey(difference.key)
            switch (difference.left, difference.right) {
            case (nil, _): report.add("object", "object \(name) is missing from current state")
            case (_, nil): report.add("object", "object \(name) is in current state, but the log does not create it")
            default: report.add("object", "object \(name) differs from its state replayed from the log")
            }
        }
    }

    /// Views and creation orders, entry by entry, plus the structure of every live tree.
    private mutating func compareTrees(_ replayed: Snapshot) throws {
        var liveTrees: [String: (kind: String, tree: CountedTree, definition: ViewDefinition?)] = [:]
        var replayedTrees = liveTrees
        for view in try live.catalog.allViews(live.storeTxn) {
            liveTrees["view \(view.definition.name)"] = ("view", view.tree, view.definition)
        }
        for view in try replayed.catalog.allViews(replayed.storeTxn) {
            replayedTrees["view \(view.definition.name)"] = ("view", view.tree, view.definition)
        }
        if let tree = try live.catalog.referenceTree(live.storeTxn, creating: false) {
            liveTrees["the reference index"] = ("references", tree, nil)
        }
        if let tree = try replayed.catalog.referenceTree(replayed.storeTxn, creating: false) {
            replayedTrees["the reference index"] = ("references", tree, nil)
        }
        for (name, tree) in try live.catalog.collections(live.storeTxn) {
            liveTrees["creation order of \(name)"] = ("creationOrder", tree, nil)
        }
        for (name, tree) in try replayed.catalog.collections(replayed.storeTxn) {
            replayedTrees["creation order of \(name)"] = ("creationOrder", tree, nil)
        }
        for name in Set(liveTrees.keys).union(replayedTrees.keys).sorted() {
            guard let mine = liveTrees[name] else {
                report.add(replayedTrees[name]!.kind, "\(name) is missing from the live store")
                continue
            }
            guard let theirs = replayedTrees[name] else {
                report.add(mine.kind, "\(name) is in the live store, but the log does not define it")
                continue
            }
            if mine.definition != theirs.definition {
                report.add(mine.kind, "\(name) has another definition than the log gives")
            }
            for problem in try mine.tree.structuralProblems(live.storeTxn) {
                report.add(mine.kind, "\(name): \(problem)")
            }
            var left = try CountedTree.KeyIterator(mine.tree, live.storeTxn)
            var right = try CountedTree.KeyIterator(theirs.tree, replayed.storeTxn)
            var a = try left.next()
            var b = try right.next()
            while a != nil || b != nil {
                let order = a == nil ? 1 : (b == nil ? -1 : compareBytes(a!, b!))
                if order == 0 {
                    a = try left.next()
                    b = try right.next()
                } else if order < 0 {
                    report.add(mine.kind, "\(name) holds an entry for \(entryName(a!)) that the log does not give")
                    a = try left.next()
                } else {
                    report.add(mine.kind, "\(name) lacks the entry for \(entryName(b!))")
                    b = try right.next()
                }
                if report.mismatches.count >= VerificationReport.maxMismatches { return }
            }
        }
    }

    private func entryName(_ key: [UInt8]) -> String {
        guard key.count >= 2, Int(key[key.count - 1]) + 2 <= key.count else { return "an unreadable key" }
        return "id " + key.withUnsafeBytes { SortKey.id(in: $0) }
    }
}

/// Reads a snapshot's log in chunks for `Verifier.replay`, checking sequence continuity and the hash
/// chain as it goes. Used by one thread at a time (the pipeline's producer, then the verifier).
private final class CheckedLogReader: @unchecked Sendable {
    let live: Snapshot
    let last: UInt64
    private var expected: UInt64 = 1
    private var chain = ChainHash.genesis
    private var decodable = true
    private(set) var brokenAt: UInt64?
    private(set) var problem: String?
    var mismatches: [VerificationReport.Mismatch] = []

    init(live: Snapshot, last: UInt64) {
        self.live = live
        self.last = last
    }

    func next() throws -> [(event: Event, data: [UInt8]?)]? {
        guard decodable && expected <= last else { return nil }
        var batch: [(event: Event, data: [UInt8]?)] = []
        try live.log.forEach(after: expected - 1, live.txn) { sequence, record in
            if brokenAt == nil {
                if sequence != expected {
                    brokenAt = expected
                    problem = "event \(expected) is missing (the next stored event is \(sequence))"
                } else {
                    chain = chain.next(EventLog.canonicalBytes(of: record))
                    if (try? EventLog.hash(of: record)) != chain {
                        brokenAt = sequence
                        problem = "event \(sequence) does not match the chain: it or its hash was changed"
                    }
                }
            }
            do {
                var (event, data) = try EventLog.decodeWithData(record, sequence: sequence)
                event.sequence = expected
                batch.append((event, data))
            } catch {
                mismatches.append(
                    .init(
                        kind: "event", description: "event \(sequence) cannot be decoded, replay stops there: \(error)")
                )
                if brokenAt == nil {
                    brokenAt = sequence
                    problem = "event \(sequence) cannot be decoded"
                }
                decodable = false
                return false
            }
            expected += 1
            return batch.count < Store.replayChunk && sequence < last
        }
        return batch.isEmpty ? nil : batch
    }
}
