import FolioClient
import FolioCommandLine
import FolioHarness
import FolioJSON
import Foundation

/// `folio-bench watch`: delivery latency to many watchers under a steady durable write load.
/// foliod measures each event from its commit to its line leaving for the watcher's socket (`stats`
/// `watchDelivery`); the watchers here also measure from the write's send to the event's arrival.
struct WatchBenchmark {
    static let usage = """
        usage: folio-bench watch --folio-socket PATH [--watchers N] [--rate WRITES_PER_S] [--seconds S]

        Starts N watchers (default 100) on a fresh foliod, writes at a steady rate (default 1000
        durable creates/s from 4 clients) for S seconds (default 10), and reports delivery latency.
        """

    let socket: String
    let watchers: Int
    let rate: Int
    let seconds: Double

    init(_ argv: [String]) throws(UsageError) {
        var arguments = try Arguments(argv, valued: ["--folio-socket", "--watchers", "--rate", "--seconds"])
        guard let socket = arguments.value("--folio-socket") else { throw UsageError("give --folio-socket") }
        self.socket = socket
        watchers = max(1, try arguments.integer("--watchers") ?? 100)
        rate = max(1, try arguments.integer("--rate") ?? 1000)
        seconds = Double(try arguments.integer("--seconds") ?? 10)
        try arguments.rejectUnused()
    }

    func run() throws -> Int32 {
        let control = try FolioConnection(path: socket)
        guard let start = control.requestResult(["op": "stats"])?["lastSeq"]?.integerValue else {
            throw BenchError.protocolViolation("stats without lastSeq")
        }
        let writers = 4
        let total = Int(Double(rate) * seconds)
        let perWriter = total / writers
        let expected = Int64(perWriter * writers)

        // Watchers: each reads event lines and notes (arrival - send time written into the event).
        let arrivals = Locked(LatencyHistogram())
        let failures = Locked<[String]>([])
        let ready = DispatchGroup()
        let finished = DispatchGroup()
        let socket = self.socket
        for watcher in 0..<watchers {
            ready.enter()
            finished.enter()
            Thread {
                defer { finished.leave() }
                var histogram = LatencyHistogram()
                do {
                    let connection = try FolioConnection(path: socket)
                    try connection.send(["op": "watch", "tag": .int(Int64(watcher)), "after": .int(start)])
                    _ = try connection.readLine()
                    ready.leave()
                    var received: Int64 = 0
                    while received < expected {
                        guard let line = try connection.readLine() else { throw BenchError.closed(socket) }
                        let now = MonotonicClock.now()
                        guard let sent = Self.integer(after: Array(#""sent":"#.utf8), in: line) else {
                            throw BenchError.protocolViolation(String(decoding: line, as: UTF8.self))
                        }
                        histogram.record(now - min(now, UInt64(sent)))
                        received += 1
                    }
                } catch {
                    failures.withLock { $0.append("watcher \(watcher): \(error)") }
                }
                arrivals.withLock { $0.merge(histogram) }
            }.start()
        }
        ready.wait()

        // Writers: paced durable creates, each carrying its send time.
        let acks = Locked(LatencyHistogram())
        let writing = DispatchGroup()
        let interval = UInt64(Double(writers) / Double(rate) * 1e9)
        let began = MonotonicClock.now()
        for writer in 0..<writers {
            writing.enter()
            Thread {
                defer { writing.leave() }
                var histogram = LatencyHistogram()
                do {
                    let connection = try FolioConnection(path: socket)
                    var next = began + UInt64(writer) * interval / UInt64(writers)
                    for _ in 0..<perWriter {
                        MonotonicClock.sleep(until: next)
                        next += interval
                        let sent = MonotonicClock.now()
                        try connection.send(
                            bytes: Array(
                                #"{"op":"create","collection":"Feed","data":{"sent":\#(sent),"writer":\#(writer)}}"#
                                    .utf8) + [0x0A])
                        guard let response = try connection.readLine(),
                            response.starts(with: Array(#"{"ok":true"#.utf8))
                        else {
                            throw BenchError.protocolViolation("create failed")
                        }
                        histogram.record(MonotonicClock.now() - sent)
                    }
                } catch {
                    failures.withLock { $0.append("writer \(writer): \(error)") }
                }
                acks.withLock { $0.merge(histogram) }
            }.start()
        }
        writing.wait()
        let elapsed = Double(MonotonicClock.now() - began) / 1e9
        if finished.wait(timeout: .now() + 60) == .timedOut {
            failures.withLock { $0.append("watchers did not receive every event") }
        }
        if let failure = failures.withLock({ $0.first }) { throw BenchError.setup(failure) }

        let delivery = control.requestResult(["op": "stats"])?["watchDelivery"]?.objectValue
        let arrived = arrivals.withLock { $0 }
        let acked = acks.withLock { $0 }
        func ms(_ nanoseconds: UInt64?) -> String { String(format: "%.2f ms", Double(nanoseconds ?? 0) / 1e6) }
        func msMicros(_ micros: JSON?) -> String { String(format: "%.2f ms", Double(micros?.integerValue ?? 0) / 1000) }
        print(
            "\(watchers) watchers, \(expected) durable creates at \(Int(Double(expected) / elapsed))/s over \(String(format: "%.1f", elapsed)) s, \(arrived.count) event lines delivered"
        )
        print(
            "commit to watcher's socket (foliod):   p50 \(msMicros(delivery?["p50Micros"]))  p99 \(msMicros(delivery?["p99Micros"]))  max \(msMicros(delivery?["maxMicros"]))"
        )
        print(
            "write sent to event received (client): p50 \(ms(arrived.percentile(0.5)))  p99 \(ms(arrived.percentile(0.99)))"
        )
        print(
            "write sent to its answer (client):     p50 \(ms(acked.percentile(0.5)))  p99 \(ms(acked.percentile(0.99)))"
        )
        return 0
    }

    /// The integer right after `marker` in `line` (memmem: readers of many lines a second must not
    /// slow down the daemon they measure).
    static func integer(after marker: [UInt8], in line: [UInt8]) -> Int64? {
        guard let end = offset(after: marker, in: line) else { return nil }
        var value: Int64 = 0
        var index = end
        while index < line.count, line[index] >= 0x30 && line[index] <= 0x39 {
            value = value * 10 + Int64(line[index] - 0x30)
            index += 1
        }
        return value
    }

    /// Where the first `marker` in `line` ends, if there is one.
    static func offset(after marker: [UInt8], in line: [UInt8]) -> Int? {
        guard !marker.isEmpty, line.count >= marker.count else { return nil }
        return line.withUnsafeBytes { bytes in
            marker.withUnsafeBytes { needle in
                // memchr to each candidate first byte, memcmp for the rest (Glibc's memmem is not exported to Swift).
                let base = bytes.baseAddress!
                var start = 0
                while start + needle.count <= bytes.count {
                    guard let found = memchr(base + start, Int32(marker[0]), bytes.count - needle.count - start + 1)
                    else { return nil }
                    let at = UnsafeRawPointer(found) - base
                    if memcmp(base + at, needle.baseAddress!, needle.count) == 0 { return at + needle.count }
                    start = at + 1
                }
                return nil
            }
        }
    }
}

/// `folio-bench populate`: fills an empty foliod with N events (creates, then updates of them), for
/// the replay benchmark.
struct PopulateCommand {
    static let usage = """
        usage: folio-bench populate --folio-socket PATH [--events N] [--first K]

        Writes N events (default 1,000,000): 80% creates of ~100-byte objects (ids tK, tK+1, ...;
        K is 0 by default), then 20% updates of those objects.
        """

    let socket: String
    let events: Int
    let first: Int

    init(_ argv: [String]) throws(UsageError) {
        var arguments = try Arguments(argv, valued: ["--folio-socket", "--events", "--first"])
        guard let socket = arguments.value("--folio-socket") else { throw UsageError("give --folio-socket") }
        self.socket = socket
        events = try arguments.integer("--events") ?? 1_000_000
        first = try arguments.integer("--first") ?? 0
        guard first >= 0 else { throw UsageError("--first takes a number from 0 on") }
        try arguments.rejectUnused()
    }

    func run() throws -> Int32 {
        let creates = events * 4 / 5
        let updates = events - creates
        let first = self.first
        let start = MonotonicClock.now()
        try PipelinedLoader(socket: socket, count: creates, connections: 4) { k in
            #"{"op":"create","collection":"Task","id":"t\#(first + k)","data":{"title":"task number \#(first + k)","done":false,"n":\#(k % 1000),"tags":["home","errand"],"due":{"$date":"2026-12-01T09:00:00Z"}}}"#
        }.load()
        try PipelinedLoader(socket: socket, count: updates, connections: 4) { k in
            #"{"op":"update","collection":"Task","id":"t\#(first + (k &* 7919) % creates)","patch":{"done":true,"n":\#(k % 977)}}"#
        }.load()
        let seconds = Double(MonotonicClock.now() - start) / 1e9
        print(
            "wrote \(events) events (\(creates) creates, \(updates) updates) in \(String(format: "%.1f", seconds)) s: \(Int(Double(events) / seconds)) events/s"
        )
        return 0
    }
}

extension FolioConnection {
    /// The `result` object of a request, nil if it failed.
    func requestResult(_ request: JSON) -> JSONObject? {
        guard let response = try? self.request(request), response.objectValue?["ok"] == .bool(true) else { return nil }
        return response.objectValue?["result"]?.objectValue
    }
}
