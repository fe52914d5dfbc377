import FolioJSON
import FolioModel
import Foundation
import Testing

@testable import FolioStore

/// Runs `body` with a new store in its own temporary directory.
func withTemporaryStore<R>(_ body: (Store) throws -> R) throws -> R {
    try withTemporaryDirectory { path in try body(try Store(directory: path)) }
}

/// Executes commands one per transaction, like a writer that commits each, with a test clock.
final class TestWriter: @unchecked Sendable {
    let store: Store
    var ids = ObjectIDGenerator(random: SeededGenerator(seed: 42))
    var clock: Int64 = 1_764_000_000_000
    let origin = Origin(uid: 1000, gid: 1000, pid: 4242)

    init(_ store: Store) { self.store = store }

    /// The command's own event.
    @discardableResult
    func execute(_ command: Command) throws -> StoreWriter.Applied {
        try write(command).appended[0]
    }

    /// A write in a transaction of its own; `beforeCommit` runs inside it, just before the commit.
    @discardableResult
    func write(_ command: Command, requestKey: String? = nil, beforeCommit: (WriteOutcome) throws -> Void = { _ in })
        throws -> WriteOutcome
    {
        clock += 7
        return try store.write(
            { writer in
                try writer.execute(
                    WriteRequest(command: command, requestKey: requestKey),
                    Acceptance(timestamp: Timestamp(milliseconds: clock), origin: origin),
                    ids: &ids)
            }, beforeCommit: beforeCommit)
    }

    func create(_ collection: String, _ data: JSON, id: String? = nil) throws -> StoredObject {
        try execute(.create(collection: collection, id: id, data: data.objectValue!)).object!
    }
}

/// The store verifies, and rebuilding it or replaying its log (into `root/replayed`) gives its
/// digest and file totals again.
func expectVerifyRebuildAndReplayKeepTheDigest(_ store: Store, _ root: String) throws {
    let digest = try store.read { try $0.digest() }
    // The contents of files are never stored by these tests: verify finds each missing, and else
    // nothing.
    let report = try store.verify(scratchDirectory: root + "/scratch")
    #expect(report.chainBrokenAt == nil && report.mismatches.isEmpty, "\(report.mismatches)")
    #expect(
        report.badBlobs.allSatisfy { $0.problem == "missing" } && UInt64(report.badBlobs.count) == report.blobsChecked)
    try store.rebuild()
    #expect(try store.read { try $0.digest() } == digest)
    let replayed = try replay(store, into: root + "/replayed")
    #expect(try replayed.read { try $0.digest() } == digest)
    #expect(try replayed.read { try $0.fileTotals() } == store.read { try $0.fileTotals() })
}

/// Replays `source`'s log into a new store in `path`, as an import would.
func replay(_ source: Store, into path: String, chunk: Int = 97) throws -> Store {
    let target = try Store(directory: path, options: source.options)
    try target.append { after in
        try source.read { snapshot in
            var events: [Event] = []
            try snapshot.forEachEvent(after: after, limit: chunk) { sequence, record in
                events.append(try EventLog.decode(record, sequence: sequence))
                return true
            }
            return events
        }
    }
    return target
}

extension StoreError {
    var isConflict: Bool {
        if case .conflict = self { return true }
        return false
    }
}
