import FolioClient
import FolioCommandLine
import FolioHarness
import Foundation

/// `folio-bench fill`: writes N events as fast as atomic batches of creates go, from several
/// connections spread over one or more foliod sockets (the nodes of a cluster), and prints the rate.
struct BatchFill {
    static let usage = """
        usage: folio-bench fill --folio-socket PATH[,PATH...] [--events N] [--batch N] [--connections N]

        Writes N events (default 1,000,000) into collection Item: atomic batches of --batch creates
        (default 1000, the most a batch takes) with ids foliod assigns, each ~100 bytes of data, from
        --connections (default 8) closed-loop connections spread over the sockets in turn. Each batch
        has a request key: one answered `unavailable` (a cluster node whose call to PostgreSQL outlived
        --log-timeout: stored or not, it cannot tell) is sent again with it, up to 5 times, as
        docs/CLUSTER.md says a client should, and counted. Prints events/s, the batches' latency and
        how many were sent again.
        """

    static let maxAttempts = 5

    let sockets: [String]
    let events: Int
    let batch: Int
    let connections: Int

    init(_ argv: [String]) throws(UsageError) {
        var arguments = try Arguments(argv, valued: ["--folio-socket", "--events", "--batch", "--connections"])
        guard let sockets = arguments.value("--folio-socket") else { throw UsageError("give --folio-socket") }
        self.sockets = sockets.split(separator: ",").map(String.init)
        events = try arguments.integer("--events") ?? 1_000_000
        batch = try arguments.integer("--batch") ?? 1000
        connections = try arguments.integer("--connections") ?? 8
        try arguments.rejectUnused()
        guard events >= 1, (1...1000).contains(batch), connections >= 1, !self.sockets.isEmpty else {
            throw UsageError("--events and --connections must be positive, --batch 1 to 1000")
        }
    }

    func run() throws -> Int32 {
        let batches = (events + batch - 1) / batch
        let next = Locked(0)
        let latencies = Locked(LatencyHistogram())
        let failures = Locked<[String]>([])
        let retried = Locked(0)
        let nonce = String(time(nil), radix: 36)
        let group = DispatchGroup()
        let (sockets, events, batch) = (sockets, events, batch)
        let start = MonotonicClock.now()
        for connection in 0..<connections {
            group.enter()
            Thread {
                defer { group.leave() }
                var histogram = LatencyHistogram()
                let socket = sockets[connection % sockets.count]
                do {
                    let client = try FolioConnection(path: socket, timeout: 120)
                    while true {
                        let number = next.withLock { taken -> Int? in
                            guard taken < batches else { return nil }
                            taken += 1
                            return taken - 1
                        }
                        guard let number else { break }
                        let first = number * batch
                        let count = min(batch, events - first)
                        var line = Array(
                            #"{"op":"batch","atomic":true,"requestKey":"fill-\#(nonce)-\#(number)","ops":["#.utf8)
                        line.reserveCapacity(count * 140 + 64)
                        for k in first..<first + count {
                            if k > first { line.append(UInt8(ascii: ",")) }
                            line += Array(
                                #"{"op":"create","collection":"Item","data":{"title":"item number \#(k)","done":false,"n":\#(k % 1000),"tags":["home","weekly"],"owner":"mira"}}"#
                                    .utf8)
                        }
                        line += Array("]}\n".utf8)
                        let sent = MonotonicClock.now()
                        var attempt = 1
                        while true {
                            try client.send(bytes: line)
                            guard let answer = try client.readLine() else { throw BenchError.closed(socket) }
                            if answer.starts(with: Array(#"{"ok":true"#.utf8)) { break }
                            guard attempt < Self.maxAttempts,
                                WatchBenchmark.offset(after: Array(#""code":"unavailable""#.utf8), in: answer) != nil
                            else {
                                throw BenchError.protocolViolation(String(decoding: answer.prefix(400), as: UTF8.self))
                            }
                            attempt += 1
                            retried.withLock { $0 += 1 }
                        }
                        histogram.record(MonotonicClock.now() - sent)
                    }
                } catch {
                    failures.withLock { $0.append("connection \(connection) to \(socket): \(error)") }
                }
                latencies.withLock { $0.merge(histogram) }
            }.start()
        }
        group.wait()
        let seconds = Double(MonotonicClock.now() - start) / 1e9
        if let failure = failures.withLock({ $0.first }) { throw BenchError.setup(failure) }
        let histogram = latencies.withLock { $0 }
        print(
            "filled \(events) events in \(String(format: "%.1f", seconds)) s: \(Int(Double(events) / seconds)) events/s "
                + "(atomic batches of \(batch) creates, \(connections) connections over \(sockets.count) socket(s)); "
                + "batch p50 / p99 \(Report.percentiles(histogram)), \(retried.withLock { $0 }) sent again after `unavailable`"
        )
        return 0
    }
}
