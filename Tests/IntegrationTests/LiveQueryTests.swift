import FolioJSON
import Foundation
import Testing

/// Live queries (`watch {query}`) against the real daemon: every window a client holds, after every
/// change line it applied, is the query's answer at that line's sequence, computed from the log.
@Suite struct LiveQueryTests {
    /// The queries the tests keep live over `Task` (with view `open` defined).
    static let queries: [JSON] = [
        ["view": "open", "limit": 8],
        ["collection": "Task", "where": ["n": ["$gte": 5]], "sort": ["-n", "title"], "limit": 6],
        ["collection": "Task", "order": "desc", "limit": 5],
        ["view": "open", "limit": 8],
        ["collection": "Task", "where": ["done": true], "limit": 0],
        // Two ranges of one view: one order, two windows.
        ["view": "byDone", "where": ["done": true], "limit": 4],
        ["collection": "Task", "where": ["done": false], "sort": ["title"], "order": "desc", "limit": 4],
    ]

    /// Seeds Tasks and the view `open` (not done, by title).
    private func seed(_ daemon: RunningDaemon) throws {
        let view = try daemon.request([
            "op": "view.define", "name": "open", "collection": "Task", "where": ["done": false], "sort": ["title"],
        ])
        #expect(view.isOK, "\(view)")
        let byDone = try daemon.request([
            "op": "view.define", "name": "byDone", "collection": "Task", "sort": ["done", "title"],
        ])
        #expect(byDone.isOK, "\(byDone)")
        let connection = try daemon.connect()
        var random = SystemRandomNumberGenerator()
        for index in 0..<40 {
            _ = try connection.request([
                "op": "create", "collection": "Task", "id": .string("s\(index)"),
                "data": .object(LiveModel.randomData(&random)),
            ])
        }
    }

    /// Random creates, updates, deletes and atomic batches of them on `Task`, from `threads` connections.
    private func writeConcurrently(_ daemon: RunningDaemon, threads: Int, writes: Int) -> BackgroundThreads {
        let socket = daemon.socketPath
        return runOnThreadsInBackground(threads) { worker in
            let connection = try TestConnection(path: socket)
            var random = SystemRandomNumberGenerator()
            func op() -> JSON {
                let id = JSON.string(
                    Bool.random(using: &random)
                        ? "s\(Int.random(in: 0..<40, using: &random))"
                        : "w\(worker)-\(Int.random(in: 0..<30, using: &random))")
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<3:
                    return [
                        "op": "create", "collection": "Task", "id": id, "data": .object(LiveModel.randomData(&random)),
                    ]
                case 3..<8:
                    return [
                        "op": "update", "collection": "Task", "id": id, "patch": .object(LiveModel.randomData(&random)),
                    ]
                default: return ["op": "delete", "collection": "Task", "id": id]
                }
            }
            for _ in 0..<writes {
                if Int.random(in: 0..<5, using: &random) == 0 {
                    _ = try connection.request(["op": "batch", "atomic": false, "ops": [op(), op(), op()]])
                } else {
                    _ = try connection.request(op())
                }
            }
        }
    }

    /// Writes, in one commit, a Task that enters every window of `queries` at its top and one that
    /// is done (the total of the last changes), and returns the commit's last sequence: once a
    /// client has a change at or past it, it has seen everything before.
    private func barrier(_ daemon: RunningDaemon) throws -> Int64 {
        let created = try daemon.request([
            "op": "batch",
            "ops": [
                ["op": "create", "collection": "Task", "data": ["title": "!", "done": false, "n": 100]],
                ["op": "create", "collection": "Task", "data": ["title": "!", "done": true, "n": 0]],
            ],
        ])
        let id = try #require(created.result?["results"]?.arrayValue?.last?["result"]?["id"])
        let history = try daemon.request(["op": "history", "collection": "Task", "id": id])
        return try #require(history.result?["events"]?.arrayValue?.last?["seq"]?.integerValue)
    }

    @Test func everyWindowUnderConcurrentWritesIsTheQueryAtItsSequence() throws {
        try withRunningDaemon { daemon in
            try seed(daemon)
            let clients = try Self.queries.enumerated().map { index, query in
                try LiveClient(daemon, tag: .string("q\(index)"), query: query)
            }
            let writing = writeConcurrently(daemon, threads: 3, writes: 120)
            // Clients read while the writes go on, not only after.
            for _ in 0..<20 { for client in clients { try client.readAvailable() } }
            #expect(writing.wait().isEmpty)
            // Deletes from the top drain the kept entries below the windows: they are filled from
            // the views and the collection.
            let deleter = try daemon.connect()
            for _ in 0..<8 {
                for query in Self.queries.prefix(3) {
                    let page = try deleter.request((["op": "list", "limit": 6] as JSON).merging(query))
                    let ops: [JSON] = try #require(page.result?["items"]?.arrayValue).map {
                        ["op": "delete", "collection": "Task", "id": $0["id"]!]
                    }
                    if !ops.isEmpty { _ = try deleter.request(["op": "batch", "ops": .array(ops)]) }
                }
                for client in clients { try client.readAvailable() }
            }
            let last = try barrier(daemon)
            for client in clients { try client.read(through: last) }
            let model = try LiveModel(daemon)
            for client in clients {
                try client.checkEveryWindow(against: model)
                #expect(client.windows.count > 10, "\(client.tag): \(client.windows.count) windows")
            }
            // Two subscribers of one query get the same lines.
            #expect(clients[0].windows.map(\.sequence) == clients[3].windows.map(\.sequence))
        }
    }

    @Test func aResumedLiveQueryMissesNoChangeAndRepeatsNone() throws {
        try withRunningDaemon { daemon in
            try seed(daemon)
            let writing = writeConcurrently(daemon, threads: 2, writes: 150)
            var client = try LiveClient(daemon, tag: "r", query: Self.queries[1])
            var history: [LiveClient.Window] = []
            for round in 0..<4 {
                for _ in 0..<5 { try client.readAvailable(wait: 0.02) }
                // Dropped without a word, then resumed from the last change applied.
                client.connection.close()
                history += client.windows
                usleep(20_000)
                client = try LiveClient(daemon, tag: .string("r\(round)"), query: Self.queries[1], resuming: client)
                #expect(client.resumed, "round \(round): \(client.firstAnswer)")
            }
            #expect(writing.wait().isEmpty)
            let last = try barrier(daemon)
            try client.read(through: last)
            history += client.windows
            let model = try LiveModel(daemon)
            for window in history { try LiveClient.check(window, query: Self.queries[1], model: model, tag: "r") }
            #expect(zip(history, history.dropFirst()).allSatisfy { $0.sequence <= $1.sequence })
        }
    }

    @Test func aResumeFromTooFarBackGetsAFreshPage() throws {
        try withRunningDaemon(arguments: ["--live-resume-events", "10"]) { daemon in
            try seed(daemon)
            let first = try LiveClient(daemon, tag: "a", query: Self.queries[0])
            first.connection.close()
            for index in 0..<5 {
                _ = try daemon.request([
                    "op": "update", "collection": "Task", "id": .string("s\(index)"), "patch": ["title": "x"],
                ])
            }
            let near = try LiveClient(daemon, tag: "b", query: Self.queries[0], resuming: first)
            #expect(near.resumed)
            for index in 0..<20 {
                _ = try daemon.request([
                    "op": "update", "collection": "Task", "id": .string("s\(index)"), "patch": ["title": "y"],
                ])
            }
            let far = try LiveClient(daemon, tag: "c", query: Self.queries[0], resuming: first)
            #expect(!far.resumed && far.firstAnswer.result?["reset"] == true)
            let model = try LiveModel(daemon)
            try far.checkEveryWindow(against: model)
            try near.checkEveryWindow(against: model)
        }
    }

    @Test func aClientThatStopsReadingIsCutOffAsLaggingAndResumes() throws {
        try withRunningDaemon(arguments: ["--watch-buffer", "4096"]) { daemon in
            try seed(daemon)
            let query: JSON = ["collection": "Task", "sort": ["title"], "limit": 40]
            let client = try LiveClient(daemon, tag: "slow", query: query)
            client.connection.withDescriptor { fd in
                var size: Int32 = 4096
                _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            }
            let writer = try daemon.connect()
            let padding = JSON.string(String(repeating: "p", count: 8000))
            for index in 0..<400 {
                let response = try writer.request([
                    "op": "update", "collection": "Task", "id": .string("s\(index % 40)"),
                    "patch": ["pad": padding, "i": .int(Int64(index))],
                ])
                #expect(response.isOK)
            }
            let error = try client.readUntilEnd()
            #expect(error.errorCode == "lagging", "\(error)")
            let lastSeq = try #require(error["error"]?["lastSeq"]?.integerValue)
            #expect(lastSeq == client.sequence, "lastSeq is the last change the client got")
            let resumed = try LiveClient(daemon, tag: "slow", query: query, resuming: client)
            #expect(resumed.resumed)
            let model = try LiveModel(daemon)
            try resumed.checkEveryWindow(against: model)
            try client.checkEveryWindow(against: model)
        }
    }

    @Test func droppingTheViewEndsALiveQueryOnItAndNotOneThatOnlyReadsIt() throws {
        try withRunningDaemon { daemon in
            try seed(daemon)
            let onView = try LiveClient(daemon, tag: "v", query: ["view": "open", "limit": 5])
            let byCollection = try LiveClient(
                daemon, tag: "c",
                query: ["collection": "Task", "where": ["done": false], "sort": ["title"], "limit": 5])
            _ = try daemon.request(["op": "view.drop", "name": "open"])
            let ended = try onView.readUntilEnd()
            #expect(
                ended.errorCode == "not_found" && ended["error"]?["lastSeq"]?.integerValue == onView.sequence,
                "\(ended)")
            _ = try daemon.request([
                "op": "create", "collection": "Task", "data": ["title": "!", "done": false, "n": 1],
            ])
            let last = try barrier(daemon)
            try byCollection.read(through: last)
            try byCollection.checkEveryWindow(against: try LiveModel(daemon))
        }
    }

    @Test func badLiveQueriesAreRefusedWithTheReason() throws {
        try withRunningDaemon { daemon in
            try seed(daemon)
            let connection = try daemon.connect()
            func refusal(_ request: JSON) throws -> String {
                let answer = try connection.request(request)
                #expect(answer.errorCode == "bad_request" || answer.errorCode == "not_found", "\(request) → \(answer)")
                return answer.errorMessage ?? ""
            }
            #expect(try refusal(["op": "watch", "query": ["collection": "Task"]]).contains("needs a tag"))
            #expect(
                try refusal(["op": "watch", "tag": 1, "query": ["collection": "Task", "include": ["owner"]]]).contains(
                    "no \"include\""))
            #expect(
                try refusal(["op": "watch", "tag": 1, "query": ["collection": "Task", "after": "x"]]).contains(
                    "no \"after\""))
            #expect(
                try refusal(["op": "watch", "tag": 1, "query": ["collection": "Task", "limit": 1001]]).contains("limit")
            )
            #expect(
                try refusal(["op": "watch", "tag": 1, "query": ["collection": "Task", "colour": 1]]).contains(
                    "unknown field \"colour\""))
            #expect(try refusal(["op": "watch", "tag": 1, "query": ["view": "open", "sort": ["n"]]]).contains("sort"))
            #expect(
                try refusal(["op": "watch", "tag": 1, "query": ["view": "open", "where": ["n": 3]]]).contains(
                    "leading sort fields"))
            #expect(try refusal(["op": "watch", "tag": 1, "query": ["view": "gone"]]).contains("gone"))
            #expect(try refusal(["op": "watch", "tag": 1, "query": "Task"]).contains("must be an object"))
            #expect(
                try refusal(["op": "watch", "tag": 1, "query": ["collection": "Task"], "after": 3]).contains("not both")
            )
            #expect(try refusal(["op": "watch", "tag": 1, "resumeAfter": 3]).contains("needs \"query\""))
            #expect(
                try refusal(["op": "watch", "tag": 1, "query": ["collection": "Task"], "resumeAfter": 1_000_000])
                    .contains("beyond the last event"))
            let started = try connection.request([
                "op": "watch", "tag": "t", "query": ["collection": "Task", "limit": 1],
            ])
            #expect(started.result?["watching"] == true)
            #expect(try refusal(["op": "watch", "tag": "t"]).contains("already running"))
            #expect(
                try refusal(["op": "watch", "tag": "t", "query": ["collection": "Task"]]).contains("already running"))
            let unwatched = try connection.request(["op": "unwatch", "tag": "u", "watch": "t"])
            #expect(unwatched.result?["lastSeq"] == started.result?["seq"], "\(unwatched)")
            let stats = try connection.request(["op": "stats"])
            #expect(stats.result?["liveQueries"] == 0)
        }
    }
}

/// A client of one live query: applies its change lines as PROTOCOL.md §5.14 says, and keeps
/// every window it held, with its sequence.
final class LiveClient {
    struct Window {
        let sequence: Int64
        let items: [JSON]
        let total: Int64
    }

    let connection: TestConnection
    let tag: JSON
    let query: JSON
    let firstAnswer: JSON
    private(set) var windows: [Window] = []
    private var items: [JSON] = []
    private var total: Int64 = 0
    private(set) var sequence: Int64 = 0
    var resumed: Bool { firstAnswer.result?["resumed"] == true }
    var plan: JSON? { firstAnswer.result?["plan"] }

    /// Starts the live query, or resumes `previous`'s from its last sequence with its window.
    init(_ daemon: RunningDaemon, tag: JSON, query: JSON, resuming previous: LiveClient? = nil) throws {
        connection = try daemon.connect()
        self.tag = tag
        self.query = query
        var request: JSON = ["op": "watch", "tag": tag, "query": query]
        if let previous {
            request = ["op": "watch", "tag": tag, "query": query, "resumeAfter": .int(previous.sequence)]
            items = previous.items
            total = previous.total
        }
        firstAnswer = try connection.request(request)
        guard let result = firstAnswer.result else { throw DaemonError("watch refused: \(firstAnswer)") }
        sequence = try #require(result["seq"]?.integerValue)
        if let page = result["items"]?.arrayValue {
            items = page
            total = try #require(result["total"]?.integerValue)
        } else if let change = result["change"] {
            try apply(change)
        }
        windows.append(Window(sequence: sequence, items: items, total: total))
    }

    /// Applies the change lines that arrive within `wait` seconds.
    func readAvailable(wait: Double = 0.005) throws {
        while connection.waitReadable(timeout: wait) {
            guard let line = try connection.readJSON() else { return }
            try take(line)
        }
    }

    /// Applies change lines until one at or past `last`.
    func read(through last: Int64) throws {
        while sequence < last {
            guard let line = try connection.readJSON() else {
                throw DaemonError("\(tag): the connection closed at \(sequence)")
            }
            try take(line)
        }
    }

    /// Applies change lines until an error line ends the live query; returns it.
    func readUntilEnd() throws -> JSON {
        while true {
            guard let line = try connection.readJSON() else {
                throw DaemonError("\(tag): the connection closed at \(sequence)")
            }
            if line["ok"] == false { return line }
            try take(line)
        }
    }

    private func take(_ line: JSON) throws {
        guard line["tag"] == tag, let change = line["change"] else {
            throw DaemonError("\(tag): unexpected line \(line)")
        }
        try apply(change)
        windows.append(Window(sequence: sequence, items: items, total: total))
    }

    private func apply(_ change: JSON) throws {
        let seq = try need(change["seq"]?.integerValue)
        guard seq > sequence || windows.isEmpty else { throw DaemonError("\(tag): change \(seq) after \(sequence)") }
        var taken: [String: JSON] = [:]
        var removals: [Int] = try need(change["removed"]?.arrayValue).map { Int(try need($0["index"]?.integerValue)) }
        let moved = try need(change["moved"]?.arrayValue)
        for move in moved {
            let from = Int(try need(move["from"]?.integerValue))
            taken[try need(move["id"]?.stringValue)] = items[from]
            removals.append(from)
        }
        for index in removals.sorted(by: >) { items.remove(at: index) }
        var insertions: [(Int, JSON)] = try need(change["inserted"]?.arrayValue).map {
            (Int(try need($0["index"]?.integerValue)), try need($0["object"]))
        }
        for move in moved {
            insertions.append(
                (Int(try need(move["to"]?.integerValue)), try need(taken[try need(move["id"]?.stringValue)])))
        }
        for (index, object) in insertions.sorted(by: { $0.0 < $1.0 }) { items.insert(object, at: index) }
        for update in try need(change["updated"]?.arrayValue) {
            items[Int(try need(update["index"]?.integerValue))] = try need(update["object"])
        }
        total = try need(change["total"]?.integerValue)
        sequence = seq
    }

    private func need<T>(_ value: T?) throws -> T {
        guard let value else { throw DaemonError("\(tag): a change line without a field it must have") }
        return value
    }

    func checkEveryWindow(against model: LiveModel) throws {
        for window in windows { try Self.check(window, query: query, model: model, tag: tag) }
    }

    static func check(_ window: Window, query: JSON, model: LiveModel, tag: JSON) throws {
        let (expected, total) = model.answer(query, at: window.sequence)
        let got = window.items.map { "\($0["id"]!.stringValue!)@\($0["version"]!.integerValue!)" }
        #expect(got == expected, "\(tag) at \(window.sequence): \(query)")
        #expect(window.total == Int64(total), "\(tag) total at \(window.sequence)")
    }
}

/// The Tasks at any sequence, replayed from the log (`events`), and the live queries' answers over
/// them, sorted the way foliod sorts these values (strings and ids by bytes, numbers, then id).
struct LiveModel {
    struct Task {
        var version: Int64
        var createdAt: String
        var data: JSONObject
    }

    /// Every event of Task, in order.
    let events: [JSON]

    init(_ daemon: RunningDaemon) throws {
        var events: [JSON] = []
        var after: Int64 = 0
        let connection = try daemon.connect()
        while true {
            let page = try connection.request(["op": "events", "after": .int(after), "limit": 1000])
            let batch = try #require(page.result?["events"]?.arrayValue)
            events += batch
            guard let last = batch.last?["seq"]?.integerValue else { break }
            after = last
        }
        self.events = events.filter { $0["collection"] == "Task" }
    }

    static func randomData(_ random: inout some RandomNumberGenerator) -> JSONObject {
        var data = JSONObject()
        data["title"] = .string(["a", "b", "c", "d", "e", "f"].randomElement(using: &random)!)
        data["done"] = .bool(Int.random(in: 0..<3, using: &random) == 0)
        data["n"] = .int(Int64.random(in: 0...9, using: &random))
        return data
    }

    func tasks(at sequence: Int64) -> [String: Task] {
        var tasks: [String: Task] = [:]
        for event in events {
            guard let seq = event["seq"]?.integerValue, seq <= sequence, let id = event["id"]?.stringValue else {
                continue
            }
            let version = event["version"]!.integerValue!
            switch event["type"]?.stringValue {
            case "created":
                tasks[id] = Task(
                    version: version, createdAt: event["at"]!.stringValue!, data: event["data"]!.objectValue!)
            case "updated":
                for field in event["patch"]!.objectValue! { tasks[id]!.data[field.key] = field.value }
                tasks[id]!.version = version
            default: tasks[id] = nil
            }
        }
        return tasks
    }

    /// `id@version` of the window, and the total.
    func answer(_ query: JSON, at sequence: Int64) -> ([String], Int) {
        let tasks = tasks(at: sequence)
        var entries = tasks.map { (id: $0.key, task: $0.value) }
        let limit = Int(query["limit"]?.integerValue ?? 100)
        func string(_ task: Task, _ field: String) -> String { task.data[field]?.stringValue ?? "" }
        func number(_ task: Task) -> Int64 { task.data["n"]?.integerValue ?? -1 }
        func bytes(_ a: String, _ b: String) -> Bool { Array(a.utf8).lexicographicallyPrecedes(Array(b.utf8)) }
        let descending = query["order"] == "desc"
        if query["view"] == "byDone" {
            entries = entries.filter { $0.task.data["done"] == query["where"]?["done"] }
            entries.sort {
                string($0.task, "title") != string($1.task, "title")
                    ? bytes(string($0.task, "title"), string($1.task, "title")) : bytes($0.id, $1.id)
            }
        } else if query["view"] == "open" || query["where"]?["done"] == false {
            entries = entries.filter { $0.task.data["done"] == false }
            entries.sort {
                string($0.task, "title") != string($1.task, "title")
                    ? bytes(string($0.task, "title"), string($1.task, "title")) : bytes($0.id, $1.id)
            }
        } else if query["where"]?["done"] == true {
            entries = entries.filter { $0.task.data["done"] == true }
            entries.sort {
                $0.task.createdAt != $1.task.createdAt ? $0.task.createdAt < $1.task.createdAt : bytes($0.id, $1.id)
            }
        } else if query["where"]?["n"] != nil {
            entries = entries.filter { number($0.task) >= 5 }
            entries.sort {
                if number($0.task) != number($1.task) { return number($0.task) > number($1.task) }
                if string($0.task, "title") != string($1.task, "title") {
                    return bytes(string($0.task, "title"), string($1.task, "title"))
                }
                return bytes($0.id, $1.id)
            }
        } else if query["sort"] != nil {
            entries.sort {
                string($0.task, "title") != string($1.task, "title")
                    ? bytes(string($0.task, "title"), string($1.task, "title")) : bytes($0.id, $1.id)
            }
        } else {
            entries.sort {
                $0.task.createdAt != $1.task.createdAt ? $0.task.createdAt < $1.task.createdAt : bytes($0.id, $1.id)
            }
        }
        if descending { entries.reverse() }
        return (entries.prefix(limit).map { "\($0.id)@\($0.task.version)" }, entries.count)
    }
}

extension JSON {
    /// The object with `other`'s fields added (its own win): a request built from a query.
    fileprivate func merging(_ other: JSON) -> JSON {
        guard var object = objectValue, let more = other.objectValue else { return self }
        for field in more where object[field.key] == nil { object[field.key] = field.value }
        return .object(object)
    }
}
