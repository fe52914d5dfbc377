import FolioJSON
import FolioModel
import Foundation
import LMDB
import Testing

@testable import FolioStore

/// History pages and time travel: the state at any point is read from the nearest checkpoint, and
/// equals folding every event of the object up to that point.
@Suite struct HistoryTests {
    /// The object after each of its events, folded the plain way from the log.
    private func folded(_ store: Store, _ collection: String, _ id: String) throws -> [(
        sequence: UInt64, object: StoredObject?
    )] {
        try store.read { snapshot in
            var states: [(UInt64, StoredObject?)] = []
            var object: StoredObject?
            try snapshot.forEachEvent(after: 0, limit: .max) { sequence, record in
                let event = try EventLog.decode(record, sequence: sequence)
                guard let target = event.object, target.collection == collection, target.id == id else { return true }
                object = try event.applied(to: object)
                states.append((sequence, object))
                return true
            }
            return states
        }
    }

    @Test func timeTravelMatchesTheFoldAtEveryPoint() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            var generator = SeededGenerator(seed: 7)
            _ = try writer.create("Task", ["n": 0], id: "t")
            _ = try writer.create("Task", ["n": 0], id: "other")
            var live = true
            for step in 1...300 {
                let roll = Int.random(in: 0..<40, using: &generator)
                if !live {
                    _ = try writer.create("Task", ["n": .int(Int64(step)), "again": true], id: "t")
                    live = true
                } else if roll == 0 {
                    try writer.execute(.delete(collection: "Task", id: "t", ifVersion: nil))
                    live = false
                } else if roll == 1 {
                    try writer.execute(
                        .update(collection: "Task", id: "other", patch: ["n": .int(Int64(step))], ifVersion: nil))
                } else {
                    let patch: JSONObject =
                        roll % 3 == 0
                        ? ["k\(roll)": .null] : ["n": .int(Int64(step)), "k\(roll)": ["s": .int(Int64(step))]]
                    try writer.execute(.update(collection: "Task", id: "t", patch: patch, ifVersion: nil))
                }
            }
            let states = try folded(store, "Task", "t")
            #expect(states.count > 250)
            try store.read { snapshot in
                let head = try snapshot.head().sequence
                var expected: StoredObject?
                var index = 0
                for sequence in 0...head + 2 {
                    while index < states.count && states[index].sequence <= sequence {
                        expected = states[index].object
                        index += 1
                    }
                    #expect(try snapshot.object("Task", "t", at: .sequence(sequence)) == expected, "at \(sequence)")
                }
                // asOf: each event's instant gives the state after every event of that millisecond.
                for (sequence, object) in states.prefix(40) {
                    let instant = try snapshot.event(sequence)!.timestamp.instant
                    #expect(try snapshot.object("Task", "t", at: .instant(instant)) == object)
                }
                #expect(try snapshot.object("Task", "t", at: .instant(Instant(seconds: 0))) == nil)
                #expect(
                    try snapshot.object("Task", "t", at: .instant(Instant(seconds: 1 << 40))) == states.last?.object)
            }
        }
    }

    /// Every sixteenth version of an update is a checkpoint in the history index.
    @Test func checkpointsBoundTheFold() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            _ = try writer.create("Doc", ["v": 0], id: "d")
            for version in 2...100 {
                try writer.execute(
                    .update(collection: "Doc", id: "d", patch: ["v": .int(Int64(version))], ifVersion: nil))
            }
            let checkpoints = try store.read { snapshot in
                var count = 0
                let prefix = Keys.historyPrefix("Doc", "d")
                try snapshot.txn.withCursor(store.databases.objects) { cursor in
                    var entry = try cursor.seek(atLeast: prefix)
                    while let (key, value) = entry, key.starts(with: prefix) {
                        if value.count > 8 {
                            count += 1
                            #expect(value.loadLittleEndian(UInt64.self, at: 0) % HistoryIndex.checkpointInterval == 0)
                        }
                        entry = try cursor.next()
                    }
                }
                return count
            }
            #expect(checkpoints == 6)  // versions 16, 32, 48, 64, 80, 96
        }
    }

    @Test func historyPagesAfterASequence() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            _ = try writer.create("Doc", ["v": 0], id: "d")
            for version in 2...25 {
                _ = try writer.create("Noise", ["v": .int(Int64(version))])
                try writer.execute(
                    .update(collection: "Doc", id: "d", patch: ["v": .int(Int64(version))], ifVersion: nil))
            }
            try store.read { snapshot in
                var after: UInt64 = 0
                var versions: [Int64] = []
                var pages = 0
                while true {
                    var bytes = JSONWriter()
                    let page = try snapshot.writeHistory("Doc", "d", after: after, limit: 10, to: &bytes)
                    #expect(page.found)
                    let events = try JSONParser.parse(bytes.bytes)
                    guard case .array(let items) = events else { break }
                    versions += items.compactMap { $0.objectValue?["version"]?.integerValue }
                    pages += 1
                    guard let next = page.next else { break }
                    after = next
                }
                #expect(versions == Array(1...25))
                #expect(pages == 3)
                var bytes = JSONWriter()
                #expect(try !snapshot.writeHistory("Doc", "nope", after: 0, limit: 10, to: &bytes).found)
                bytes = JSONWriter()
                let past = try snapshot.writeHistory("Doc", "d", after: 10_000, limit: 10, to: &bytes)
                #expect(past.found && past.next == nil && bytes.bytes == Array("[]".utf8))
            }
        }
    }

    /// Marks the store as written in `format`.
    private func setFormat(_ format: UInt32, of store: Store, _ txn: Transaction) throws {
        var value: [UInt8] = []
        value.appendLittleEndian(format)
        try txn.put(store.databases.meta, Array("format".utf8), value)
    }

    /// Opens the store at `path`, written in an earlier format, and expects it upgraded: of this
    /// format, consistent with its log, and with the state digest it had.
    private func openUpgraded(_ path: String, digest: ChainHash) throws -> Store {
        let store = try Store(directory: path)
        let report = try store.verify(scratchDirectory: path + "/scratch")
        #expect(report.isConsistent, "\(report.mismatches)")
        #expect(try store.read { try $0.digest() } == digest)
        let format = try store.environment.read { txn in
            try txn.get(store.databases.meta, Array("format".utf8)).map { Array($0) }
        }
        #expect(format == withUnsafeBytes(of: StoreDatabases.formatVersion.littleEndian) { Array($0) })
        return store
    }

    /// Defines view `byN` over `Task` and creates `objects` tasks into it; returns the state digest.
    private func fillView(_ store: Store, objects: Int) throws -> ChainHash {
        let writer = TestWriter(store)
        try writer.execute(
            .defineView(
                try ViewDefinition(
                    name: "byN", collection: "Task", whereJSON: nil, sort: SortOrder(parsing: ["n"]), unique: false)))
        for number in 0..<objects {
            _ = try writer.create("Task", ["n": .int(Int64((number * 37) % objects))], id: "t\(number)")
        }
        return try store.read { try $0.digest() }
    }

    /// A store of format 5 holds no merge round (format 6 added them), one of format 6 no round of
    /// chunks (format 7 added them), and each of 5, 6 and 7 keeps the view op stream's state under
    /// key `0` of `viewops` (format 8 moved it to the main database): opened, the state moves, and
    /// the store is of format 8 with its views' pending ops as they were.
    @Test(arguments: [UInt32(5), 6, 7]) func aStoreOfFormatFiveToSevenIsOfFormatEightOnceItsStateMoved(format: UInt32)
        throws
    {
        // The default limit, which 300 ops do not reach, whatever FOLIO_VIEW_BUFFER says.
        try ViewBuffer.$limitOverride.withValue(65536) {
            try withTemporaryDirectory { path in
                let digest: ChainHash
                do {
                    let store = try Store(directory: path)
                    digest = try fillView(store, objects: 300)
                    try store.environment.write { txn in
                        // Where formats 5 to 7 kept the state, and their records of one op each,
                        // without the key's length.
                        let state = try #require(
                            try txn.get(store.databases.viewOps.main, ViewBuffer.stateKey).map { Array($0) })
                        try txn.delete(store.databases.viewOps.main, ViewBuffer.stateKey)
                        var former: [([UInt8], [UInt8])] = []
                        try txn.withCursor(store.databases.viewOps.ops) { cursor in
                            var entry = try cursor.first()
                            while let (key, value) = entry {
                                var number = UInt64(bigEndian: key.loadUnaligned(as: UInt64.self))
                                var offset = 0
                                while offset < value.count {
                                    let length = Int(
                                        value.loadUnaligned(fromByteOffset: offset, as: UInt16.self).littleEndian)
                                    former.append(
                                        (ViewBuffer.opKey(number), Array(value[(offset + 2)..<(offset + 7 + length)])))
                                    number += 1
                                    offset += 7 + length
                                }
                                entry = try cursor.next()
                            }
                        }
                        #expect(former.count == 300)
                        try txn.empty(store.databases.viewOps.ops)
                        try txn.put(store.databases.viewOps.ops, ViewBuffer.formerStateKey, state)
                        for (key, value) in former { try txn.put(store.databases.viewOps.ops, key, value) }
                        try setFormat(format, of: store, txn)
                    }
                    store.close()
                }
                let store = try openUpgraded(path, digest: digest)
                try store.environment.read { txn in
                    let pending = try ViewBuffer.state(
                        StoreTransaction(
                            lmdb: txn, trees: store.databases.trees, cache: nil, viewOps: store.databases.viewOps)
                    ).pending
                    #expect(pending == 300, "the ops stay pending")
                    #expect(
                        try txn.get(store.databases.viewOps.ops, ViewBuffer.formerStateKey) == nil,
                        "the state left the ops' database")
                    #expect(try txn.statistics(store.databases.viewOps.ops).entries == 300, "a record of each op")
                }
                store.close()
            }
        }
    }

    /// A store of format 3, whose tree branches stored their last child's count and whose trees'
    /// headers were node 0, is upgraded when opened: its trees are built again from the log. The
    /// store here is made format 3 by hand: its marker set back, each header moved to node 0 and a
    /// count put into each branch's last child, as 3 had them; without the rebuild this format
    /// would find no header, and its check of a tree would report the counts.
    @Test func aFormatThreeStoreIsUpgradedOnOpen() throws {
        try withTemporaryDirectory { path in
            let digest: ChainHash
            do {
                let store = try Store(directory: path)
                digest = try fillView(store, objects: 800)
                var branches = 0
                try store.environment.write { txn in
                    // The view's pending ops into its nodes, for branches to damage.
                    let storeTxn = StoreTransaction(
                        lmdb: txn, trees: store.databases.trees, cache: nil, viewOps: store.databases.viewOps)
                    try #require(try store.applier.catalog.view("byN", storeTxn)).tree.merge(storeTxn)
                    try setFormat(3, of: store, txn)
                    var records: [([UInt8], [UInt8])] = []
                    try txn.withCursor(store.databases.trees) { cursor in
                        var entry = try cursor.seek(atLeast: [0])
                        while let (key, value) = entry {
                            records.append((Array(key), Array(value)))
                            entry = try cursor.next()
                        }
                    }
                    for (key, bytes) in records {
                        // Format 3 kept a tree's header as node 0.
                        if key.suffix(8).allSatisfy({ $0 == 0xFF }) {
                            try txn.delete(store.databases.trees, key)
                            try txn.put(
                                store.databases.trees, Array(key.prefix(4)) + [UInt8](repeating: 0, count: 8), bytes)
                            continue
                        }
                        var node = TreeNode(bytes: bytes)
                        guard !node.isLeaf, node.count > 0 else { continue }
                        node.setChildCount(node.count - 1, 100)
                        try txn.put(store.databases.trees, key, node.bytes)
                        branches += 1
                    }
                }
                #expect(branches >= 2)
                store.close()
            }
            let store = try openUpgraded(path, digest: digest)
            store.close()
        }
    }

    /// A store of format 1 (history without checkpoints) is upgraded when opened: its derived state
    /// is built again from the log, and it verifies.
    @Test func aFormatOneStoreIsUpgradedOnOpen() throws {
        try withTemporaryDirectory { path in
            let digest: ChainHash
            do {
                let store = try Store(directory: path)
                let writer = TestWriter(store)
                _ = try writer.create("Doc", ["v": 0], id: "d")
                for version in 2...40 {
                    try writer.execute(
                        .update(collection: "Doc", id: "d", patch: ["v": .int(Int64(version))], ifVersion: nil))
                }
                digest = try store.read { try $0.digest() }
                try store.environment.write { txn in
                    try setFormat(1, of: store, txn)
                    // As format 1 wrote them: the version alone.
                    let prefix = Keys.historyPrefix("Doc", "d")
                    var keys: [([UInt8], UInt64)] = []
                    try txn.withCursor(store.databases.objects) { cursor in
                        var entry = try cursor.seek(atLeast: prefix)
                        while let (key, value) = entry, key.starts(with: prefix) {
                            if value.count > 8 { keys.append((Array(key), value.loadLittleEndian(UInt64.self, at: 0))) }
                            entry = try cursor.next()
                        }
                    }
                    for (key, version) in keys {
                        var plain: [UInt8] = []
                        plain.appendLittleEndian(version)
                        try txn.put(store.databases.objects, key, plain)
                    }
                    #expect(keys.count == 2)
                }
                store.close()
            }
            let store = try openUpgraded(path, digest: digest)
            defer { store.close() }
            #expect(try store.read { try $0.object("Doc", "d", at: .sequence(35)) }?.version == 35)
        }
    }
}
