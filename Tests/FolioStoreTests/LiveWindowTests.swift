import FolioJSON
import FolioModel
import Testing

@testable import FolioStore

/// Live windows kept current from committed events, checked after every commit against the same
/// query run then, and the change they produce applied to a client's copy.
@Suite struct LiveWindowTests {
    /// What a client holds: ids, versions and objects, in window order.
    struct ClientWindow: Equatable {
        var items: [(id: String, version: UInt64, object: JSON)] = []

        static func == (a: ClientWindow, b: ClientWindow) -> Bool {
            a.items.map(\.id) == b.items.map(\.id) && a.items.map(\.version) == b.items.map(\.version)
                && a.items.map(\.object) == b.items.map(\.object)
        }

        init(_ entries: some Collection<LiveEntry>) {
            items = entries.map { ($0.id, $0.version, try! JSONParser.parse($0.object)) }
        }

        init(objects: [JSON]) {
            items = objects.map { ($0["id"]!.stringValue!, UInt64($0["version"]!.integerValue!), $0) }
        }

        /// PROTOCOL §5.14: removals (removed, moved from) high to low, insertions (inserted, moved
        /// to) low to high, then updates.
        mutating func apply(_ change: JSON) {
            var taken: [String: (id: String, version: UInt64, object: JSON)] = [:]
            let moved = change["moved"]!.arrayValue!
            var removals = change["removed"]!.arrayValue!.map { Int($0["index"]!.integerValue!) }
            for move in moved {
                let from = Int(move["from"]!.integerValue!)
                taken[move["id"]!.stringValue!] = items[from]
                removals.append(from)
            }
            for index in removals.sorted(by: >) { items.remove(at: index) }
            var insertions: [(Int, (id: String, version: UInt64, object: JSON))] = change["inserted"]!.arrayValue!.map {
                let object = $0["object"]!
                return (
                    Int($0["index"]!.integerValue!),
                    (object["id"]!.stringValue!, UInt64(object["version"]!.integerValue!), object)
                )
            }
            for move in moved { insertions.append((Int(move["to"]!.integerValue!), taken[move["id"]!.stringValue!]!)) }
            for (index, item) in insertions.sorted(by: { $0.0 < $1.0 }) { items.insert(item, at: index) }
            for update in change["updated"]!.arrayValue! {
                let object = update["object"]!
                items[Int(update["index"]!.integerValue!)] = (
                    object["id"]!.stringValue!, UInt64(object["version"]!.integerValue!), object
                )
            }
        }
    }

    /// The query's first page and total as `list` answers them now.
    private func listed(_ store: Store, _ query: Query) throws -> (ClientWindow, Int) {
        let result = try store.read { try $0.run(query) }
        guard case .array(let items) = try JSONParser.parse(Array("[".utf8) + result.items + Array("]".utf8)) else {
            return (ClientWindow(objects: []), 0)
        }
        return (ClientWindow(objects: items), result.total)
    }

    @Test func windowsFollowARandomWorkloadAsListWouldAnswer() throws {
        try withTemporaryStore { store in
            let writer = TestWriter(store)
            var random = SeededGenerator(seed: 2026)
            try writer.execute(
                .defineView(
                    try ViewDefinition(
                        name: "byTitle", collection: "Task", whereJSON: nil, sort: SortOrder(parsing: ["title"]),
                        unique: false)))
            try writer.execute(
                .defineView(
                    try ViewDefinition(
                        name: "open", collection: "Task", whereJSON: ["done": false],
                        sort: SortOrder(parsing: ["-n", "title"]), unique: false)))
            try writer.execute(
                .defineView(
                    try ViewDefinition(
                        name: "byOwner", collection: "Task", whereJSON: nil,
                        sort: SortOrder(parsing: ["owner", "title"]), unique: false)))
            let queries: [Query] = [
                try Query(source: .collection("Task"), limit: 5),
                try Query(source: .collection("Task"), descending: true, limit: 4),
                try Query(source: .view("byTitle"), limit: 7),
                try Query(source: .view("open"), descending: true, limit: 3),
                try Query(source: .view("byOwner"), whereJSON: ["owner": ["$ref": "User/ann"]], limit: 4),
                try Query(
                    source: .collection("Task"), whereJSON: ["owner": ["$ref": "User/bob"]],
                    sort: SortOrder(parsing: ["title"]), limit: 2),
                try Query(
                    source: .collection("Task"), whereJSON: ["n": ["$gt": 3]], sort: SortOrder(parsing: ["-n"]),
                    limit: 6),
                try Query(source: .collection("Task"), whereJSON: ["done": true], limit: 0),
                try Query(source: .collection("Note"), limit: 3),
            ]
            var windows = try store.read { snapshot in
                try queries.map { query in
                    let live = try snapshot.liveQuery(for: query)
                    return try LiveWindow(
                        live, snapshot: snapshot,
                        rewind: snapshot.liveRewind(
                            of: live.collection, to: try snapshot.head().sequence, maxEvents: 0)!)
                }
            }
            #expect(windows[4].query.plan == .viewRange("byOwner", fixed: ["owner"]))
            #expect(windows[6].query.index == .scan)
            var clients = windows.map { ClientWindow($0.visible) }
            // What list answered right after each commit, by the commit's last sequence.
            var expected: [UInt64: [(ClientWindow, Int)]] = [:]
            var commits: [[StoreWriter.Applied]] = []
            var ids: [String] = []
            let titles = ["a", "b", "c", "d", "e", "f", "g", "h"]
            func data() -> JSONObject {
                var data = JSONObject()
                data["title"] = .string(titles.randomElement(using: &random)!)
                data["done"] = .bool(Bool.random(using: &random))
                data["n"] = .int(Int64.random(in: 0...8, using: &random))
                if Bool.random(using: &random) {
                    data["owner"] = ["$ref": .string(["User/ann", "User/bob"].randomElement(using: &random)!)]
                }
                return data
            }
            func process(_ applied: [StoreWriter.Applied]) throws {
                let last = applied.last!.event.sequence
                for index in windows.indices {
                    let before = windows[index].visibleVersions
                    let totalBefore = windows[index].total
                    for event in applied { try windows[index].apply(event) }
                    windows[index].trim()
                    #expect(!windows[index].broken)
                    if windows[index].needsEntries {
                        let window = windows[index]
                        try store.read { snapshot in
                            let rewind = try snapshot.liveRewind(
                                of: window.query.collection, to: window.sequence, maxEvents: 1000)!
                            try windows[index].fill(from: snapshot, rewind: rewind)
                        }
                    }
                    let (list, total) = expected[last]![index]
                    #expect(ClientWindow(windows[index].visible) == list, "query \(index) after event \(last)")
                    #expect(windows[index].total == total, "query \(index) total after event \(last)")
                    let change = LiveChange(
                        from: before, to: windows[index].visible, sequence: last, total: windows[index].total)
                    var writer = JSONWriter(capacity: 256)
                    change.write(to: &writer)
                    let json = try JSONParser.parse(writer.bytes)
                    clients[index].apply(json)
                    #expect(
                        clients[index] == list, "query \(index): the change applied to the client after event \(last)")
                    if change.isEmpty && total == totalBefore { continue }
                    #expect(json["seq"]?.integerValue == Int64(last))
                }
            }
            for step in 0..<600 {
                var operations: [BatchOperation] = []
                for _ in 0..<(Int.random(in: 0..<4, using: &random) == 0 ? 3 : 1) {
                    let roll = Int.random(in: 0..<100, using: &random)
                    if roll < 40 || ids.isEmpty {
                        let id = "t\(step)-\(operations.count)"
                        ids.append(id)
                        operations.append(
                            BatchOperation(
                                command: .create(
                                    collection: Bool.random(using: &random) ? "Task" : "Note", id: id, data: data()),
                                idResult: nil, hasResultValues: false))
                    } else if roll < 80 {
                        let id = ids.randomElement(using: &random)!
                        for collection in ["Task", "Note"] {
                            var patch = data()
                            if Bool.random(using: &random) { patch["owner"] = .null }
                            operations.append(
                                BatchOperation(
                                    command: .update(collection: collection, id: id, patch: patch, ifVersion: nil),
                                    idResult: nil, hasResultValues: false))
                        }
                    } else {
                        let id = ids.remove(at: Int.random(in: 0..<ids.count, using: &random))
                        for collection in ["Task", "Note"] {
                            operations.append(
                                BatchOperation(
                                    command: .delete(collection: collection, id: id, ifVersion: nil), idResult: nil,
                                    hasResultValues: false))
                        }
                    }
                }
                let outcome = try writer.write(.batch(operations, atomic: false))
                guard !outcome.appended.isEmpty else { continue }
                expected[outcome.appended.last!.event.sequence] = try queries.map { try listed(store, $0) }
                commits.append(outcome.appended)
                // Windows follow a few commits behind, as the live query thread may: their
                // fills read a store that has moved on, rewound.
                while commits.count > Int.random(in: 0...3, using: &random) { try process(commits.removeFirst()) }
            }
            for commit in commits { try process(commit) }

            // A window made at an old sequence from today's store equals the one kept since.
            let head = try store.read { try $0.head().sequence }
            let old = expected.keys.sorted()[expected.count / 2]
            for (index, query) in queries.enumerated() {
                let window = try store.read { snapshot in
                    let live = try snapshot.liveQuery(for: query)
                    return try LiveWindow(
                        live, snapshot: snapshot,
                        rewind: snapshot.liveRewind(of: live.collection, to: old, maxEvents: Int(head))!)
                }
                #expect(ClientWindow(window.visible) == expected[old]![index].0, "query \(index) rewound to \(old)")
                #expect(window.total == expected[old]![index].1)
            }
        }
    }

    @Test func changesTurnAnyWindowIntoAnyOther() throws {
        var random = SeededGenerator(seed: 7)
        func entries(_ ids: [String], version: UInt64) -> [LiveEntry] {
            ids.map {
                LiveEntry(
                    key: [], id: $0, version: version, object: Array("{\"id\":\"\($0)\",\"version\":\(version)}".utf8))
            }
        }
        for _ in 0..<500 {
            let pool = (0..<12).map { "i\($0)" }
            let old = Array(pool.shuffled(using: &random).prefix(Int.random(in: 0...8, using: &random)))
            let new = Array(pool.shuffled(using: &random).prefix(Int.random(in: 0...8, using: &random)))
            let newEntries = new.map { id in entries([id], version: Bool.random(using: &random) ? 2 : 1)[0] }
            let change = LiveChange(from: old.map { ($0, 1) }, to: newEntries, sequence: 9, total: new.count)
            var writer = JSONWriter(capacity: 256)
            change.write(to: &writer)
            var client = ClientWindow(entries(old, version: 1))
            client.apply(try JSONParser.parse(writer.bytes))
            #expect(client == ClientWindow(newEntries), "\(old) → \(new)")
            // Moves are as few as can be: the items kept in place are a longest common run.
            let common = new.filter { old.contains($0) }
            let run = LiveChange.longestIncreasingRun(common.map { old.firstIndex(of: $0)! }).count
            #expect(change.moved.count == common.count - run)
        }
    }
}

extension JSON {
    fileprivate subscript(key: String) -> JSON? { objectValue?[key] }

    fileprivate var arrayValue: [JSON]? {
        if case .array(let elements) = self { return elements }
        return nil
    }
}
