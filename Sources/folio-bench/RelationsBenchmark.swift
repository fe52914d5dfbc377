import FolioClient
import FolioCommandLine
import FolioJSON
import Foundation

/// `folio-bench relations`: the figures of references. Loads N items that all refer to one category,
/// then times 20-item pages of `backlinks` of that category and of a view range fixed by it, at the
/// start, middle and end, by offset and by cursor, each beside a Redis sorted set read at the same
/// position; then atomic batches of 100 creates against 100 separate creates; then deletes that
/// cascade over owned objects, with the latency of another client's gets during them.
struct RelationsBenchmark {
    static let usage = """
        usage: folio-bench relations --folio-socket PATH [--redis-socket PATH] [--folio-pid PID --redis-pid PID]
                                     [--items N] [--samples N] [--duration S] [--warmup S] [--rounds N]
                                     [--cascades N] [--owned N] [--read-rate GETS_PER_S] [--markdown FILE]

        Loads N items (default 1,000,000) into collection Item of an empty foliod, every one referring to
        Category/c1 from its field "category", and the same ids into two Redis sorted sets. Pages of
        backlinks and of a view sorted by [category, title], listed with where {category: c1}, are timed
        against ZRANGE, ZRANGEBYLEX and ZRANGEBYSCORE (given both pids, under each CPU placement, as in
        folio-bench views). Then atomic batches of 100 creates against 100 separate creates, S seconds
        (default 5) after a warm-up (default 1) per scenario and round (default 2 rounds); then N
        deletes (default 3) of a Box owning --owned Parts (default 10,000), with gets paced at
        --read-rate (default 5,000/s) on another connection. bench/relations.sh starts the daemons.
        """

    static let category = "Category/c1"
    static let from = "Item.category"
    static let view = "byCategoryTitle"
    static let pageSize = 20
    private static let redisBacklinks = "rel:backlinks"
    private static let redisView = "rel:view"

    let folioSocket: String
    let redisSocket: String?
    /// foliod's and redis-server's pids, when the reads are to be timed under each `CPUPlacement`.
    let daemons: [Int32]
    let items: Int
    let samples: Int
    let timing: ScenarioRunner.Timing
    let rounds: Int
    let cascades: Int
    let owned: Int
    let readRate: Int
    let markdownPath: String?

    init(_ argv: [String]) throws(UsageError) {
        var arguments = try Arguments(
            argv,
            valued: [
                "--folio-socket", "--redis-socket", "--folio-pid", "--redis-pid", "--items", "--samples", "--duration",
                "--warmup",
                "--rounds", "--cascades", "--owned", "--read-rate", "--markdown",
            ])
        guard let folio = arguments.value("--folio-socket") else { throw UsageError("give --folio-socket") }
        folioSocket = folio
        redisSocket = arguments.value("--redis-socket")
        var daemons: [Int32] = []
        for option in ["--folio-pid", "--redis-pid"] {
            guard let value = try arguments.integer(option) else { continue }
            guard let pid = Int32(exactly: value), pid > 0 else { throw UsageError("\(option) needs a process id") }
            daemons.append(pid)
        }
        self.daemons = daemons
        items = try arguments.integer("--items") ?? 1_000_000
        samples = max(ReadTimer.rounds, try arguments.integer("--samples") ?? 500)
        timing = ScenarioRunner.Timing(
            warmupSeconds: try Self.seconds(arguments.value("--warmup"), "--warmup") ?? 1,
            durationSeconds: try Self.seconds(arguments.value("--duration"), "--duration") ?? 5)
        rounds = max(1, try arguments.integer("--rounds") ?? 2)
        cascades = max(1, try arguments.integer("--cascades") ?? 3)
        owned = max(1, try arguments.integer("--owned") ?? 10_000)
        readRate = max(1, try arguments.integer("--read-rate") ?? 5000)
        markdownPath = arguments.value("--markdown")
        try arguments.rejectUnused()
        guard items >= 1000 else { throw UsageError("--items must be at least 1000") }
        guard items % 1_000_003 != 0 else { throw UsageError("--items must not be a multiple of 1,000,003") }
        guard daemons.count != 1 else { throw UsageError("give both --folio-pid and --redis-pid, or neither") }
    }

    private static func seconds(_ text: String?, _ name: String) throws(UsageError) -> Double? {
        guard let text else { return nil }
        guard let seconds = Double(text), seconds >= 0, seconds.isFinite else {
            throw UsageError("\(name) needs a number of seconds, not '\(text)'")
        }
        return seconds
    }

    /// Item k's id: fixed width, so that id order (foliod's reference index, Redis's ZRANGEBYLEX of
    /// equal scores) is the order of k.
    static func itemID(_ k: Int) -> String {
        let digits = String(k)
        return "i" + String(repeating: "0", count: max(0, 7 - digits.count)) + digits
    }

    /// Item k's place in title order: a permutation of 0 ..< items (1,000,003 is prime), so that
    /// the view's order is not the ids'.
    private func titleRank(_ k: Int) -> Int { (k &* 1_000_003) % items }

    func run() throws -> Int32 {
        var notes: [String] = []
        /// Printed at once, not after the progress lines on stderr when both go to one file.
        func show(_ text: String) {
            print(text)
            fflush(nil)
        }
        func say(_ line: String) {
            show(line)
            notes.append(line)
        }
        let folio = try FolioConnection(path: folioSocket)
        let redis = try redisSocket.map { try RESPClient(path: $0) }
        try load(folio: folio, redis: redis, say: say)
        let reads = try timeReads(folio: folio, redis: redis, say: say)
        show("\n" + reads.plain + "\n")
        let batches = try BatchComparison(socket: folioSocket, pid: daemons.first, timing: timing, rounds: rounds).run()
        show(batches.plain + "\n")
        for line in try CascadeProbe(socket: folioSocket, cascades: cascades, owned: owned, readRate: readRate).run() {
            say(line)
        }

        if let path = markdownPath {
            let markdown =
                notes.map { "- " + $0 }.joined(separator: "\n") + "\n\n" + reads.markdown + "\n\n" + batches.markdown
                + "\n"
            guard FileManager.default.createFile(atPath: path, contents: Data(markdown.utf8)) else {
                throw BenchError.setup("cannot write \(path)")
            }
        }
        return 0
    }

    /// Three categories; the items, all under c1, with a few under c0 and c2 so that c1's range lies
    /// inside the view; the view; the Redis sets: ids at score 0 (read by lex), ids scored by title rank.
    private func load(folio: FolioConnection, redis: RESPClient?, say: (String) -> Void) throws {
        for name in ["c0", "c1", "c2"] {
            let created = try folio.request([
                "op": "create", "collection": "Category", "id": .string(name), "data": ["name": .string(name)],
            ])
            guard created.objectValue?["ok"] == .bool(true) else {
                throw BenchError.setup("create Category/\(name): \(created)")
            }
        }
        let others = 2000
        let start = MonotonicClock.now()
        let items = self.items
        try PipelinedLoader(socket: folioSocket, count: items + others, connections: 4) { k in
            if k >= items {
                let other = k - items
                return
                    #"{"op":"create","collection":"Item","id":"o\#(other)","data":{"category":{"$ref":"Category/c\#(other % 2 * 2)"},"title":"t\#(other)","n":\#(other)}}"#
            }
            let rank = String((k &* 1_000_003) % items)
            let title = "t" + String(repeating: "0", count: max(0, 7 - rank.count)) + rank
            return
                #"{"op":"create","collection":"Item","id":"\#(Self.itemID(k))","data":{"category":{"$ref":"\#(Self.category)"},"title":"\#(title)","n":\#(k)}}"#
        }.load()
        let loadSeconds = Double(MonotonicClock.now() - start) / 1e9
        say(
            "loaded \(items) items referring to \(Self.category) (and \(others) to c0 and c2) in \(String(format: "%.2f", loadSeconds)) s: "
                + "\(Int(Double(items + others) / loadSeconds)) durable creates/s, 4 pipelining connections")

        let buildStart = MonotonicClock.now()
        let defined = try folio.request([
            "op": "view.define", "name": .string(Self.view), "collection": "Item", "sort": ["category", "title"],
        ])
        guard defined.objectValue?["ok"] == .bool(true) else { throw BenchError.setup("view.define: \(defined)") }
        let buildSeconds = Double(MonotonicClock.now() - buildStart) / 1e9
        say(
            "built view \(Self.view) (sort [category, title]) over \(items + others) items in \(String(format: "%.2f", buildSeconds)) s"
        )

        guard let redis else { return }
        _ = try redis.command(["DEL", Self.redisBacklinks, Self.redisView])
        var commands: [[String]] = []
        for first in stride(from: 0, to: items, by: 500) {
            let ks = first..<min(first + 500, items)
            commands.append(["ZADD", Self.redisBacklinks] + ks.flatMap { ["0", Self.itemID($0)] })
            commands.append(["ZADD", Self.redisView] + ks.flatMap { [String(titleRank($0)), Self.itemID($0)] })
            if commands.count >= 40 || ks.upperBound == items {
                for reply in try redis.pipeline(commands) {
                    if case .error(let message) = reply { throw BenchError.setup("ZADD: \(message)") }
                }
                commands.removeAll(keepingCapacity: true)
            }
        }
    }

    /// The page reads of both kinds at three positions, by offset and by cursor.
    private func timeReads(folio: FolioConnection, redis: RESPClient?, say: (String) -> Void) throws -> TextTable {
        let timer = ReadTimer(folio: folio, redis: redis, daemons: daemons, samples: samples)
        var table = TextTable(
            header: ["read", "placement", "Folio p50 / p99", "Redis p50 / p99", "ratio p50", "ratio p99"],
            leftAligned: 2)
        let backlinks: JSONObject = [
            "op": "backlinks", "ref": .string(Self.category), "from": .string(Self.from),
            "limit": .int(Int64(Self.pageSize)),
        ]
        let range: JSONObject = [
            "op": "list", "view": .string(Self.view), "where": ["category": ["$ref": .string(Self.category)]],
            "limit": .int(Int64(Self.pageSize)),
        ]
        let last = Int64(Self.pageSize - 1)
        for offset in [0, items / 2, items - Self.pageSize] {
            let o = Int64(offset)
            for (label, base, source, redisCommand, cursorCommand) in [
                (
                    "backlinks", backlinks, "references", ["ZRANGE", Self.redisBacklinks, "\(o)", "\(o + last)"],
                    [
                        "ZRANGEBYLEX", Self.redisBacklinks, offset == 0 ? "-" : "(" + Self.itemID(offset - 1), "+",
                        "LIMIT", "0", "\(Self.pageSize)",
                    ]
                ),
                (
                    "view range", range, "viewRange", ["ZRANGE", Self.redisView, "\(o)", "\(o + last)"],
                    [
                        "ZRANGEBYSCORE", Self.redisView, offset == 0 ? "-inf" : "(\(offset - 1)", "+inf", "LIMIT", "0",
                        "\(Self.pageSize)",
                    ]
                ),
            ] {
                var byOffset = base
                byOffset["offset"] = .int(o)
                var byCursor = base
                if offset > 0 {
                    var previous = base
                    previous["offset"] = .int(o - Int64(Self.pageSize))
                    let answer = try folio.request(.object(previous))
                    guard case .string(let cursor)? = answer.objectValue?["result"]?.objectValue?["next"] else {
                        throw BenchError.protocolViolation(
                            "\(label): no cursor at offset \(offset - Self.pageSize): \(answer)")
                    }
                    byCursor["after"] = .string(cursor)
                }
                for (paging, request, command) in [
                    ("at offset", byOffset, redisCommand), ("after a cursor at", byCursor, cursorCommand),
                ] {
                    let name = "\(label), page of \(Self.pageSize) \(paging) \(offset)"
                    say(
                        "\(name): "
                            + (try check(
                                request, source: source, against: redis == nil ? nil : command, folio: folio,
                                redis: redis)))
                    for figures in try timer.time(.object(request), redisCommand: redis == nil ? nil : command) {
                        table.append([
                            name, figures.placement.label,
                            "\(ReadTimer.micros(figures.folioP50)) / \(ReadTimer.micros(figures.folioP99))",
                            figures.redisP50.map {
                                "\(ReadTimer.micros($0)) / \(ReadTimer.micros(figures.redisP99 ?? 0))"
                            } ?? "-",
                            figures.ratioP50.map { String(format: "%.2f", $0) } ?? "-",
                            figures.ratioP99.map { String(format: "%.2f", $0) } ?? "-",
                        ])
                    }
                }
            }
        }
        return table
    }

    /// Asks once with `explain`: the plan's source must be `source`, and the page's ids those the
    /// Redis command returns. Describes the plan.
    private func check(
        _ request: JSONObject, source: String, against command: [String]?, folio: FolioConnection, redis: RESPClient?
    ) throws
        -> String
    {
        var explained = request
        explained["explain"] = true
        let answer = try folio.request(.object(explained))
        guard let result = answer.objectValue?["result"]?.objectValue, let plan = result["plan"]?.objectValue,
            case .array(let page)? = result["items"]
        else { throw BenchError.protocolViolation("\(answer)") }
        guard plan["source"]?.stringValue == source else {
            throw BenchError.protocolViolation(
                "plan source \(plan["source"].map { "\($0)" } ?? "none"), not \(source): \(JSON.object(plan))")
        }
        let ids = page.compactMap { $0.objectValue?["id"]?.stringValue }
        guard ids.count == Self.pageSize else {
            throw BenchError.protocolViolation("a page of \(ids.count) items, not \(Self.pageSize)")
        }
        if let redis, let command {
            guard case .array(let members) = try redis.command(command) else {
                throw BenchError.protocolViolation("\(command[0]): not an array")
            }
            let redisIDs = members.map { member -> String in
                if case .bulk(let bytes) = member { return String(decoding: bytes, as: UTF8.self) }
                return "?"
            }
            guard redisIDs == ids else {
                throw BenchError.setup(
                    "Folio's page (\(ids.first!) ...) is not Redis's (\(redisIDs.first ?? "none") ...) for \(command.joined(separator: " "))"
                )
            }
        }
        return
            "plan \(String(decoding: JSON.object(plan).serialized(), as: UTF8.self)), total \(result["total"]?.integerValue ?? -1), items \(ids.first!) ... \(ids.last!)"
            + (command == nil ? "" : ", the same as Redis's")
    }
}
