import FolioClient
import FolioCommandLine
import FolioHarness
import FolioJSON
import Foundation

/// `folio-bench views`: the figures of materialized views, beside a Redis sorted set holding the
/// same ranks. Loads N objects, builds a view sorted by `rank` over them, then times `count` and
/// 20-item pages at the start, middle and end (by offset and by cursor) against ZCARD, ZRANGE by rank
/// and ZRANGEBYSCORE; then a scan no view answers, and durable writes into a collection with five
/// views against one with none.
struct ViewsBenchmark {
    static let usage = """
        usage: folio-bench views --folio-socket PATH [--redis-socket PATH] [--objects N] [--samples N]
                                 [--write-seconds S] [--write-rounds R] [--write-preload N] [--write-views N]
                                 [--markdown FILE]
                                 [--folio-pid PID --redis-pid PID]

        Loads N objects (default 1,000,000) into collection Item of an empty foliod, and their ranks
        into a Redis sorted set, then measures views. bench/views.sh starts both daemons and runs this.
        Given both daemons' pids, each read is timed three times: unpinned, with this client and both
        daemons on CPU 0, and with the daemons on CPU 1. The write phases (S seconds each, default 5)
        start from empty collections, or from N objects in each (--write-preload: the five views are
        then built over them, so that each write meets views of that size and their merges).
        The two phases run R times each (--write-rounds, default 3), alternating which goes first;
        the ratio is the median of the rounds' ratios, each taken from a pair of adjacent phases.
        --write-views N (1 to 5, default 5) defines only the first N of the five views.
        """

    let folioSocket: String
    let redisSocket: String?
    let objects: Int
    let samples: Int
    let writeSeconds: Double
    /// Pairs of write phases (no views, views), alternating which runs first.
    let writeRounds: Int
    /// Objects put into each write phase's collection before it (the five views defined after them).
    let writePreload: Int
    /// How many of the five views the second write phase's collection has.
    let writeViews: Int
    let markdownPath: String?
    /// foliod's and redis-server's pids, when the reads are to be timed under each `CPUPlacement`.
    let daemons: [Int32]

    init(_ argv: [String]) throws(UsageError) {
        var arguments = try Arguments(
            argv,
            valued: [
                "--folio-socket", "--redis-socket", "--objects", "--samples", "--write-seconds", "--write-rounds",
                "--write-preload", "--write-views",
                "--markdown",
                "--folio-pid", "--redis-pid",
            ])
        guard let folio = arguments.value("--folio-socket") else { throw UsageError("give --folio-socket") }
        folioSocket = folio
        redisSocket = arguments.value("--redis-socket")
        objects = try arguments.integer("--objects") ?? 1_000_000
        samples = max(1, try arguments.integer("--samples") ?? 300)
        writeSeconds = Double(try arguments.integer("--write-seconds") ?? 5)
        writeRounds = try arguments.integer("--write-rounds") ?? 3
        guard writeRounds >= 1 else { throw UsageError("--write-rounds must be at least 1") }
        writePreload = max(0, try arguments.integer("--write-preload") ?? 0)
        writeViews = try arguments.integer("--write-views") ?? 5
        guard (1...5).contains(writeViews) else { throw UsageError("--write-views must be 1 to 5") }
        markdownPath = arguments.value("--markdown")
        var daemons: [Int32] = []
        for option in ["--folio-pid", "--redis-pid"] {
            guard let value = try arguments.integer(option) else { continue }
            guard let pid = Int32(exactly: value), pid > 0 else { throw UsageError("\(option) needs a process id") }
            daemons.append(pid)
        }
        self.daemons = daemons
        try arguments.rejectUnused()
        guard objects >= 1000 else { throw UsageError("--objects must be at least 1000") }
        guard daemons.count != 1 else { throw UsageError("give both --folio-pid and --redis-pid, or neither") }
    }

    /// The rank of object k: a permutation of 0 ..< N, so ranks are unique and unordered by k.
    private func rank(_ k: Int) -> Int { (k &* 1_000_003) % objects }

    func run() throws -> Int32 {
        var notes: [String] = []
        func say(_ line: String) {
            print(line)
            notes.append(line)
        }
        let loadStart = MonotonicClock.now()
        let objects = self.objects
        try PipelinedLoader(socket: folioSocket, count: objects, connections: 4) { k in
            let rank = (k &* 1_000_003) % objects
            return
                #"{"op":"create","collection":"Item","id":"i\#(k)","data":{"rank":\#(rank),"title":"item \#(k)","group":\#(k % 1000),"score":\#(Double((k &* 37) % 10_007) / 10),"tags":["x","y"]}}"#
        }.load()
        let loadSeconds = Double(MonotonicClock.now() - loadStart) / 1e9
        say(
            "loaded \(objects) objects into foliod in \(format(loadSeconds)) s (\(Int(Double(objects) / loadSeconds)) creates/s, durable, 4 pipelining connections)"
        )
        let redis = try redisSocket.map { try RESPClient(path: $0) }
        if let redis {
            var batch: [[String]] = []
            for k in 0..<objects {
                batch.append(["ZADD", "ranks", String(rank(k)), "i\(k)"])
                if batch.count == 1000 || k == objects - 1 {
                    _ = try redis.pipeline(batch)
                    batch.removeAll(keepingCapacity: true)
                }
            }
        }

        let folio = try FolioConnection(path: folioSocket)
        let buildStart = MonotonicClock.now()
        let defined = try folio.request(["op": "view.define", "name": "byRank", "collection": "Item", "sort": ["rank"]])
        let buildSeconds = Double(MonotonicClock.now() - buildStart) / 1e9
        guard defined.objectValue?["ok"] == .bool(true) else {
            throw BenchError.protocolViolation("view.define: \(defined)")
        }
        say(
            "built view byRank over \(objects) objects in \(format(buildSeconds)) s: \(Int(Double(objects) / buildSeconds)) objects/s"
        )

        let timer = ReadTimer(folio: folio, redis: redis, daemons: daemons, samples: samples)
        var table = TextTable(
            header: [
                "read", "placement", "Folio p50 / p99", "Folio server p50", "Redis p50 / p99", "Redis server mean",
                "ratio p50",
                "ratio server",
            ],
            leftAligned: 2)
        func measure(_ label: String, folioRequest: JSON, redisCommand: [String]?) throws {
            for figures in try timer.time(folioRequest, redisCommand: redisCommand) {
                let serverP50 = figures.folioServerMicros ?? 0
                var row = [
                    label, figures.placement.label,
                    "\(ReadTimer.micros(figures.folioP50)) / \(ReadTimer.micros(figures.folioP99))",
                    ReadTimer.micros(serverP50),
                ]
                if let redisP50 = figures.redisP50, let redisP99 = figures.redisP99, let ratio = figures.ratioP50 {
                    let serverMean = figures.redisServerMicros ?? 0
                    row += [
                        "\(ReadTimer.micros(redisP50)) / \(ReadTimer.micros(redisP99))",
                        String(format: "%.1f µs", serverMean),
                        String(format: "%.2f", ratio), String(format: "%.2f", serverP50 / max(serverMean, 0.01)),
                    ]
                } else {
                    row += ["-", "-", "-", "-"]
                }
                table.append(row)
            }
        }

        try measure(
            "count", folioRequest: ["op": "count", "view": "byRank", "explain": true], redisCommand: ["ZCARD", "ranks"])
        for offset in [0, objects / 2, objects - 20] {
            try measure(
                "page of 20 at offset \(offset)",
                folioRequest: [
                    "op": "list", "view": "byRank", "offset": .int(Int64(offset)), "limit": 20, "explain": true,
                ],
                redisCommand: ["ZRANGE", "ranks", String(offset), String(offset + 19)])
        }
        for offset in [0, objects / 2, objects - 20] {
            var request: JSONObject = ["op": "list", "view": "byRank", "limit": 20, "explain": true]
            if offset > 0 {
                let previous = try folio.request([
                    "op": "list", "view": "byRank", "offset": .int(Int64(offset - 20)), "limit": 20,
                ])
                guard case .string(let cursor)? = previous.objectValue?["result"]?.objectValue?["next"] else {
                    throw BenchError.protocolViolation("no cursor at offset \(offset - 20)")
                }
                request["after"] = .string(cursor)
            }
            try measure(
                "page of 20 after a cursor at \(offset)", folioRequest: .object(request),
                redisCommand: [
                    "ZRANGEBYSCORE", "ranks", offset == 0 ? "-inf" : "(\(offset - 1)", "+inf", "LIMIT", "0", "20",
                ])
        }
        print("\n" + table.plain + "\n")

        // A filter no view answers: every object is read.
        var scan = LatencyHistogram()
        var examined = 0
        var scanMicros: [Double] = []
        for _ in 0..<3 {
            let start = MonotonicClock.now()
            let response = try folio.request([
                "op": "list", "collection": "Item", "where": ["group": 7], "sort": ["-score"], "limit": 20,
                "explain": true,
            ])
            scan.record(MonotonicClock.now() - start)
            let plan = response.objectValue?["result"]?.objectValue?["plan"]?.objectValue
            examined = Int(plan?["examined"]?.integerValue ?? 0)
            scanMicros.append(Double(plan?["micros"]?.integerValue ?? 0))
        }
        let bestScan = scanMicros.min() ?? 1
        say(
            "scan (where group = 7, sort -score, no view): \(examined) objects examined in \(format(bestScan / 1e6)) s at best: "
                + "\(Int(Double(examined) / (bestScan / 1e6))) objects/s (client p50 \(format(Double(scan.percentile(0.5) ?? 0) / 1e9)) s)"
        )

        // Durable creates into a collection without views and into one with five.
        let fiveViews: [(String, JSON)] = Array(
            [
                ("fiveA", ["a"]), ("fiveB", ["b"]), ("fiveCD", ["c", "-d"]), ("fiveE", ["-e"]), ("fiveAB", ["a", "b"]),
            ].prefix(writeViews))
        let viewsName = writeViews == 5 ? "five views" : writeViews == 1 ? "one view" : "\(writeViews) views"
        if writePreload > 0 {
            let start = MonotonicClock.now()
            for collection in ["Plain", "Five"] {
                try PipelinedLoader(socket: folioSocket, count: writePreload, connections: 4) { k in
                    var random = SplitMix64(seed: UInt64(k) &+ 1_000_000)
                    return Self.createLine(collection: collection, random: random.next())
                }.load()
            }
            say(
                "preloaded \(writePreload) objects into each write phase's collection in \(format(Double(MonotonicClock.now() - start) / 1e9)) s"
            )
        }
        let defineStart = MonotonicClock.now()
        for (name, sort) in fiveViews {
            let defined = try folio.request([
                "op": "view.define", "name": .string(name), "collection": "Five", "sort": sort,
            ])
            guard defined.objectValue?["ok"] == .bool(true) else {
                throw BenchError.protocolViolation("view.define: \(defined)")
            }
        }
        if writePreload > 0 {
            say(
                "defined the \(viewsName == "one view" ? "view" : viewsName) over them in \(format(Double(MonotonicClock.now() - defineStart) / 1e9)) s"
            )
        }
        // The two kinds of phase alternate, each round starting with the one the last ended with,
        // so that a slow minute of the shared machine lands on both, and the collections grow alike.
        var rounds: [(plain: WritePhase, five: WritePhase)] = []
        for round in 0..<writeRounds {
            if round % 2 == 0 {
                let plain = try writePhase(collection: "Plain", round: round, folio)
                rounds.append((plain, try writePhase(collection: "Five", round: round, folio)))
            } else {
                let five = try writePhase(collection: "Five", round: round, folio)
                rounds.append((try writePhase(collection: "Plain", round: round, folio), five))
            }
        }
        let ratios = rounds.map { $0.five.rate / $0.plain.rate }
        let median = ratios.sorted()[ratios.count / 2]
        let middle = rounds[ratios.firstIndex(of: median)!]
        say(
            "durable creates, 16 clients, \(Int(writeSeconds)) s each, \(writeRounds) round(s)\(writePreload > 0 ? ", \(writePreload) objects before" : ""): "
                + "no views \(rounds.map { String(Int($0.plain.rate)) }.joined(separator: " / ")) creates/s, "
                + "\(viewsName) \(rounds.map { String(Int($0.five.rate)) }.joined(separator: " / ")) creates/s; "
                + "\(viewsName) ÷ none \(ratios.map { String(format: "%.2f", $0) }.joined(separator: " / ")), median "
                + "\(String(format: "%.2f", median))× the rate (each create \(String(format: "%.0f", (1 / median - 1) * 100))% slower)"
        )
        say("  no views, the median round:   \(middle.plain.summary)")
        say("  \(viewsName), the median round: \(middle.five.summary)")

        if let path = markdownPath {
            let markdown = notes.map { "- " + $0 }.joined(separator: "\n") + "\n\n" + table.markdown + "\n"
            guard FileManager.default.createFile(atPath: path, contents: Data(markdown.utf8)) else {
                throw BenchError.setup("cannot write \(path)")
            }
        }
        return 0
    }

    /// What one write phase did: its rate, and per commit the writes and the pages the disks took.
    private struct WritePhase {
        var rate: Double
        /// Each create's wait, from its send to its answer.
        var latency: LatencyHistogram
        var writesPerCommit: Double
        /// 4 KiB units written to the machine's disks (`/sys/block/*/stat`, every process), per commit.
        var diskPagesPerCommit: Double
        /// foliod's CPU time per create, when its pid is known.
        var cpuMicros: Double?

        var summary: String {
            let cpu = cpuMicros.map { ", foliod CPU \(String(format: "%.0f", $0)) µs a create" } ?? ""
            let waits = [0.5, 0.99, 0.999].map { ReadTimer.micros(latency.percentile($0) ?? 0) }
            return String(
                format: "%.1f creates a commit, %.0f disk pages (4 KiB) a commit, %.1f a create", writesPerCommit,
                diskPagesPerCommit,
                diskPagesPerCommit / max(writesPerCommit, 1)) + cpu
                + "; wait p50 \(waits[0]), p99 \(waits[1]), p99.9 \(waits[2]), max \(ReadTimer.micros(latency.maximum))"
        }
    }

    /// Runs `writeRate` and reads foliod's commit counters, the disks' sectors written and foliod's
    /// CPU time around it: a view's cost on the write path is mostly pages written, so the phase
    /// reports how many.
    private func writePhase(collection: String, round: Int, _ folio: FolioConnection) throws -> WritePhase {
        func counters() throws -> (commits: Double, writes: Double) {
            let stats = try folio.request(["op": "stats"]).objectValue?["result"]?.objectValue
            return (Double(stats?["commits"]?.integerValue ?? 0), Double(stats?["committedWrites"]?.integerValue ?? 0))
        }
        let pid = daemons.first
        let before = try counters()
        let sectorsBefore = Self.sectorsWritten()
        let cpuBefore = pid.flatMap { ProcessCPU.read(pid: $0) }
        let (rate, latency) = try writeRate(collection: collection, round: round)
        let after = try counters()
        let sectors = Self.sectorsWritten() - sectorsBefore
        let commits = max(after.commits - before.commits, 1)
        let writes = after.writes - before.writes
        var cpu: Double?
        if let pid, let start = cpuBefore, let end = ProcessCPU.read(pid: pid), writes > 0 {
            cpu = (end.seconds - start.seconds) / writes * 1e6
        }
        return WritePhase(
            rate: rate, latency: latency, writesPerCommit: writes / commits,
            diskPagesPerCommit: sectors * 512 / 4096 / commits, cpuMicros: cpu)
    }

    /// Sectors written to the machine's disks so far: the sum over the block devices backed by
    /// hardware (`/sys/block/NAME/device` exists, so loop, RAM and device-mapper devices, which
    /// would count the same writes twice, are left out).
    private static func sectorsWritten() -> Double {
        var total = 0.0
        for name in ProcFile.names(in: "/sys/block") ?? [] where access("/sys/block/\(name)/device", F_OK) == 0 {
            let fields = ProcFile.read("/sys/block/\(name)/stat")?.split(separator: " ") ?? []
            if fields.count > 6, let sectors = Double(fields[6]) { total += sectors }
        }
        return total
    }

    /// A create of the write phases, its fields drawn from `random`.
    private static func createLine(collection: String, random r: UInt64) -> String {
        #"{"op":"create","collection":"\#(collection)","data":{"a":\#(r % 1000),"b":"w\#(r % 9973)","c":\#(r % 17),"d":\#(r % 101),"e":\#((r >> 20) % 100_000)}}"#
    }

    /// Durable creates per second from 16 closed-loop clients, and their waits.
    private func writeRate(collection: String, round: Int) throws -> (rate: Double, latency: LatencyHistogram) {
        let counts = Locked([Int](repeating: 0, count: 16))
        let latency = Locked(LatencyHistogram())
        let failures = Locked<[String]>([])
        let deadline = MonotonicClock.now() + MonotonicClock.nanoseconds(seconds: writeSeconds)
        let socket = folioSocket
        let group = DispatchGroup()
        for client in 0..<16 {
            group.enter()
            Thread {
                defer { group.leave() }
                do {
                    let connection = try FolioConnection(path: socket)
                    var random = SplitMix64(seed: UInt64(round * 16 + client + 1))
                    var done = 0
                    var waits = LatencyHistogram()
                    while true {
                        let sent = MonotonicClock.now()
                        guard sent < deadline else { break }
                        let line = Self.createLine(collection: collection, random: random.next()) + "\n"
                        try connection.send(bytes: Array(line.utf8))
                        guard let response = try connection.readLine(),
                            response.starts(with: Array(#"{"ok":true"#.utf8))
                        else {
                            throw BenchError.protocolViolation("create in \(collection) failed")
                        }
                        waits.record(MonotonicClock.now() - sent)
                        done += 1
                    }
                    counts.withLock { $0[client] = done }
                    latency.withLock { $0.merge(waits) }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }.start()
        }
        group.wait()
        if let failure = failures.withLock({ $0.first }) { throw BenchError.setup(failure) }
        return (Double(counts.withLock { $0.reduce(0, +) }) / writeSeconds, latency.withLock { $0 })
    }

    private func format(_ seconds: Double) -> String { String(format: "%.2f", seconds) }
}
