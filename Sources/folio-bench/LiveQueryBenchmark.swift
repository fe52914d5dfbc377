import CFolioSystem
import FolioClient
import FolioCommandLine
import FolioHarness
import FolioJSON
import Foundation

/// `folio-bench live`: many live queries over one view under a steady durable write load, against as
/// many plain event watches under the same load: delivery latency (foliod's, from commit to socket,
/// and the clients', from the write's send to the line's arrival) and foliod's CPU per second.
struct LiveQueryBenchmark {
    static let usage = """
        usage: folio-bench live --folio-socket PATH [--queries N] [--connections C] [--rate WRITES_PER_S]
                                [--seconds S] [--shape same|ranges|watch|none]

        On a fresh foliod, defines view feedByOwner (Feed by owner, then -sent), starts N (default
        1000) live queries over C connections (default 100), writes at a steady rate (default 1000
        durable creates/s from 4 clients) for S seconds (default 10), and reports delivery latency
        and foliod's CPU. --shape same: every query is the view's first 20 (one shared window, every
        write changes it); ranges: query k is owner uk's first 20 (a range of the view each, a write
        changes one); watch: N plain watches of the collection's events instead; none: the writes alone.
        """

    enum Shape: String { case same, ranges, watch, none }

    let socket: String
    let queries: Int
    let connections: Int
    let rate: Int
    let seconds: Double
    let shape: Shape

    init(_ argv: [String]) throws(UsageError) {
        var arguments = try Arguments(
            argv, valued: ["--folio-socket", "--queries", "--connections", "--rate", "--seconds", "--shape"])
        guard let socket = arguments.value("--folio-socket") else { throw UsageError("give --folio-socket") }
        self.socket = socket
        queries = max(1, try arguments.integer("--queries") ?? 1000)
        connections = max(1, min(queries, try arguments.integer("--connections") ?? 100))
        rate = max(1, try arguments.integer("--rate") ?? 1000)
        seconds = Double(try arguments.integer("--seconds") ?? 10)
        guard let shape = Shape(rawValue: arguments.value("--shape") ?? "same") else {
            throw UsageError("--shape takes same, ranges, watch or none")
        }
        if shape == .ranges && queries > 1000 {
            throw UsageError("--shape ranges takes at most 1000 queries (one batch ends them)")
        }
        self.shape = shape
        try arguments.rejectUnused()
    }

    func run() throws -> Int32 {
        let control = try FolioConnection(path: socket)
        var uid: UInt32 = 0
        var gid: UInt32 = 0
        var pid: Int32 = 0
        _ = control.withDescriptor { folio_peer_credentials($0, &uid, &gid, &pid) }
        _ = control.requestResult([
            "op": "view.define", "name": "feedByOwner", "collection": "Feed", "sort": ["owner", "-sent"],
        ])
        let owners = shape == .ranges ? queries : 1
        let writers = 4
        let total = Int(Double(rate) * seconds)
        let perWriter = total / writers
        let expectedWrites = perWriter * writers
        let perConnection = queries / connections

        let arrivals = Locked(LatencyHistogram())
        let failures = Locked<[String]>([])
        let ready = DispatchGroup()
        let finished = DispatchGroup()
        let received = Locked(0)
        let socket = self.socket
        let shape = self.shape
        for connectionIndex in 0..<(shape == .none ? 0 : connections) {
            ready.enter()
            finished.enter()
            Thread {
                defer { finished.leave() }
                var histogram = LatencyHistogram()
                var lines = 0
                do {
                    let connection = try FolioConnection(path: socket)
                    let held = (connectionIndex * perConnection)..<((connectionIndex + 1) * perConnection)
                    for query in held {
                        let request: JSON
                        switch shape {
                        case .watch: request = ["op": "watch", "tag": .int(Int64(query)), "collection": "Feed"]
                        case .same:
                            request = [
                                "op": "watch", "tag": .int(Int64(query)),
                                "query": ["view": "feedByOwner", "limit": 20],
                            ]
                        case .none: return
                        case .ranges:
                            request = [
                                "op": "watch", "tag": .int(Int64(query)),
                                "query": [
                                    "view": "feedByOwner", "where": ["owner": .string("u\(query)")], "limit": 20,
                                ],
                            ]
                        }
                        try connection.send(request)
                        guard let answer = try connection.readLine(), answer.starts(with: Array(#"{"tag":"#.utf8)),
                            answer.firstRange(of: Array(#""ok":true"#.utf8)) != nil
                        else { throw BenchError.protocolViolation("watch refused") }
                    }
                    ready.leave()
                    // Until each query has had its line of the end marker (one commit that changes every window).
                    var ended = 0
                    let endMarker = Array(#""end":true"#.utf8)
                    while ended < held.count {
                        guard let line = try connection.readLine() else { throw BenchError.closed(socket) }
                        let now = MonotonicClock.now()
                        lines += 1
                        if WatchBenchmark.offset(after: endMarker, in: line) != nil {
                            ended += 1
                        } else if let sent = WatchBenchmark.integer(after: Array(#""sent":"#.utf8), in: line) {
                            // The newest object of a change (inserted at 0) or the event carries its send time.
                            histogram.record(now - min(now, UInt64(sent)))
                        }
                    }
                } catch {
                    failures.withLock { $0.append("connection \(connectionIndex): \(error)") }
                }
                arrivals.withLock { $0.merge(histogram) }
                received.withLock { $0 += lines }
            }.start()
        }
        ready.wait()
        if let failure = failures.withLock({ $0.first }) { throw BenchError.setup(failure) }

        let cpuBefore = ProcessCPU.read(pid: pid)?.seconds ?? 0
        let writing = DispatchGroup()
        let interval = UInt64(Double(writers) / Double(rate) * 1e9)
        let began = MonotonicClock.now()
        for writer in 0..<writers {
            writing.enter()
            Thread {
                defer { writing.leave() }
                do {
                    let connection = try FolioConnection(path: socket)
                    var next = began + UInt64(writer) * interval / UInt64(writers)
                    for index in 0..<perWriter {
                        MonotonicClock.sleep(until: next)
                        next += interval
                        let sent = MonotonicClock.now()
                        let owner = (index * writers + writer) % owners
                        try connection.send(
                            bytes: Array(
                                #"{"op":"create","collection":"Feed","data":{"owner":"u\#(owner)","sent":\#(sent),"text":"a line of the feed"}}"#
                                    .utf8) + [0x0A])
                        guard let response = try connection.readLine(),
                            response.starts(with: Array(#"{"ok":true"#.utf8))
                        else {
                            throw BenchError.protocolViolation("create failed")
                        }
                    }
                } catch {
                    failures.withLock { $0.append("writer \(writer): \(error)") }
                }
            }.start()
        }
        writing.wait()
        let elapsed = Double(MonotonicClock.now() - began) / 1e9
        // foliod's figures before the end marker, whose one commit changes every window at once.
        usleep(300_000)
        let cpu = (ProcessCPU.read(pid: pid)?.seconds ?? 0) - cpuBefore
        let stats = control.requestResult(["op": "stats"])
        // One commit that changes every window, and is one event for the watches: its line ends each client.
        let markers: [JSON] = (0..<(shape == .watch ? 1 : owners)).map { owner in
            [
                "op": "create", "collection": "Feed",
                "data": ["owner": .string("u\(owner)"), "sent": .int(Int64(MonotonicClock.now())), "end": true],
            ]
        }
        if control.requestResult(["op": "batch", "ops": .array(markers)]) == nil {
            failures.withLock { $0.append("the end marker was refused") }
        }
        if finished.wait(timeout: .now() + 120) == .timedOut {
            failures.withLock { $0.append("clients did not receive every line") }
        }
        if let failure = failures.withLock({ $0.first }) { throw BenchError.setup(failure) }

        let delivery = stats?[shape == .watch ? "watchDelivery" : "liveDelivery"]?.objectValue
        let arrived = arrivals.withLock { $0 }
        func ms(_ nanoseconds: UInt64?) -> String { String(format: "%.2f ms", Double(nanoseconds ?? 0) / 1e6) }
        func msMicros(_ micros: JSON?) -> String { String(format: "%.2f ms", Double(micros?.integerValue ?? 0) / 1000) }
        let what =
            shape == .watch ? "event watches" : shape == .none ? "(no subscribers)" : "live queries (\(shape.rawValue))"
        let subscribers = shape == .none ? "no subscribers" : "\(queries) \(what) on \(connections) connections"
        print(
            "\(subscribers), \(expectedWrites) durable creates at \(Int(Double(expectedWrites) / elapsed))/s over \(String(format: "%.1f", elapsed)) s, \(received.withLock { $0 }) lines delivered"
        )
        print(
            "commit to client's socket (foliod):  p50 \(msMicros(delivery?["p50Micros"]))  p99 \(msMicros(delivery?["p99Micros"]))  max \(msMicros(delivery?["maxMicros"]))"
        )
        print(
            "write sent to line received (client): p50 \(ms(arrived.percentile(0.5)))  p99 \(ms(arrived.percentile(0.99)))"
        )
        print(String(format: "foliod CPU: %.2f s over %.1f s (%.0f%% of one core)", cpu, elapsed, cpu / elapsed * 100))
        return 0
    }
}
