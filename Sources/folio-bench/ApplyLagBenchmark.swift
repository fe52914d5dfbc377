import FolioClient
import FolioCommandLine
import FolioHarness
import Foundation

/// `folio-bench apply-lag`: how long after a cluster node answers a write the other nodes have it.
/// Writers send durable creates to node A at a steady rate and note when each answer (with its
/// `seq`) arrives; a watcher on each other node notes when the event with that sequence arrives. A
/// watch delivers an event once its node has applied and committed it, the moment a read with
/// `minSeq` of that sequence would be answered there, without polling.
struct ApplyLagBenchmark {
    static let usage = """
        usage: folio-bench apply-lag --writer-socket PATH --watch-socket PATH[,PATH...] [--rate WRITES_PER_S]
                                     [--seconds S] [--writers N]

        Cluster nodes (docs/CLUSTER.md): N writers (default 4) send durable creates to the node on
        --writer-socket, together RATE a second (default 500) for S seconds (default 10), each paced on
        a fixed schedule; a watch on each node of --watch-socket receives their events. Prints, per
        watching node, apply lag: from the write's answer on the writer's node to its event on the
        watching node (negative when the event arrived first), and from the write's send to its event.
        """

    let writerSocket: String
    let watchSockets: [String]
    let rate: Int
    let seconds: Double
    let writers: Int

    init(_ argv: [String]) throws(UsageError) {
        var arguments = try Arguments(
            argv, valued: ["--writer-socket", "--watch-socket", "--rate", "--seconds", "--writers"])
        guard let writer = arguments.value("--writer-socket") else { throw UsageError("give --writer-socket") }
        guard let watch = arguments.value("--watch-socket") else { throw UsageError("give --watch-socket") }
        writerSocket = writer
        watchSockets = watch.split(separator: ",").map(String.init)
        rate = try arguments.integer("--rate") ?? 500
        seconds = Double(try arguments.integer("--seconds") ?? 10)
        writers = try arguments.integer("--writers") ?? 4
        try arguments.rejectUnused()
        guard rate >= 1, writers >= 1, seconds > 0, !watchSockets.isEmpty else {
            throw UsageError("--rate, --writers and --seconds must be positive, and --watch-socket name a socket")
        }
    }

    /// A write as its writer saw it (monotonic ns).
    private struct Acknowledged {
        let sequence: Int64
        let sent: UInt64
        let answered: UInt64
    }

    func run() throws -> Int32 {
        let perWriter = max(1, Int(Double(rate) * seconds) / writers)
        let expected = perWriter * writers
        let failures = Locked<[String]>([])

        // One watch per node, of the collection the writers write; each notes every event's arrival.
        let arrivals = watchSockets.map { _ in Locked<[Int64: UInt64]>([:]) }
        let ready = DispatchGroup()
        let finished = DispatchGroup()
        for (node, socket) in watchSockets.enumerated() {
            ready.enter()
            finished.enter()
            let arrived = arrivals[node]
            Thread {
                defer { finished.leave() }
                var isReady = false
                defer { if !isReady { ready.leave() } }
                var seen: [Int64: UInt64] = [:]
                seen.reserveCapacity(expected)
                do {
                    let connection = try FolioConnection(path: socket, timeout: 30)
                    try connection.send(["op": "watch", "tag": "lag", "collection": "Lag"])
                    guard let answer = try connection.readLine(),
                        answer.starts(with: Array(#"{"tag":"lag","ok":true"#.utf8))
                    else {
                        throw BenchError.protocolViolation("the watch on \(socket) was refused")
                    }
                    isReady = true
                    ready.leave()
                    while seen.count < expected {
                        guard let line = try connection.readLine() else { throw BenchError.closed(socket) }
                        let now = MonotonicClock.now()
                        guard let sequence = WatchBenchmark.integer(after: Array(#""seq":"#.utf8), in: line) else {
                            throw BenchError.protocolViolation(String(decoding: line.prefix(300), as: UTF8.self))
                        }
                        seen[sequence] = now
                    }
                } catch {
                    failures.withLock { $0.append("watcher on \(socket): \(error)") }
                }
                arrived.withLock { $0 = seen }
            }.start()
        }
        ready.wait()
        if let failure = failures.withLock({ $0.first }) { throw BenchError.setup(failure) }

        // Writers: paced durable creates on the writer's node, each answer's seq noted.
        let acknowledged = Locked<[Acknowledged]>([])
        let writing = DispatchGroup()
        let interval = UInt64(Double(writers) / Double(rate) * 1e9)
        let began = MonotonicClock.now() + 10_000_000
        let socket = writerSocket
        for writer in 0..<writers {
            writing.enter()
            Thread {
                defer { writing.leave() }
                var mine: [Acknowledged] = []
                mine.reserveCapacity(perWriter)
                do {
                    let connection = try FolioConnection(path: socket, timeout: 30)
                    var next = began + UInt64(writer) * interval / UInt64(writers)
                    for n in 0..<perWriter {
                        MonotonicClock.sleep(until: next)
                        next += interval
                        let sent = MonotonicClock.now()
                        try connection.send(
                            bytes: Array(
                                #"{"op":"create","collection":"Lag","data":{"writer":\#(writer),"n":\#(n)}}"#.utf8) + [
                                    0x0A
                                ])
                        guard let answer = try connection.readLine() else { throw BenchError.closed(socket) }
                        let answered = MonotonicClock.now()
                        guard answer.starts(with: Array(#"{"ok":true"#.utf8)),
                            let sequence = WatchBenchmark.integer(after: Array(#""seq":"#.utf8), in: answer)
                        else {
                            throw BenchError.protocolViolation(
                                "a create answered without seq: \(String(decoding: answer.prefix(300), as: UTF8.self))")
                        }
                        mine.append(Acknowledged(sequence: sequence, sent: sent, answered: answered))
                    }
                } catch {
                    failures.withLock { $0.append("writer \(writer): \(error)") }
                }
                acknowledged.withLock { $0 += mine }
            }.start()
        }
        writing.wait()
        let elapsed = Double(MonotonicClock.now() - began) / 1e9
        if finished.wait(timeout: .now() + 60) == .timedOut {
            failures.withLock { $0.append("the watchers did not receive every event within 60 s") }
        }
        if let failure = failures.withLock({ $0.first }) { throw BenchError.setup(failure) }

        let writes = acknowledged.withLock { $0 }
        let answerTimes = writes.map { Int64($0.answered - $0.sent) }
        print(
            "\(writes.count) durable creates to \(writerSocket) at \(Int(Double(writes.count) / elapsed))/s over "
                + "\(String(format: "%.1f", elapsed)) s from \(writers) paced writers")
        print("  write sent to its answer on the writer's node: \(Self.summary(answerTimes))")
        for (node, socket) in watchSockets.enumerated() {
            let seen = arrivals[node].withLock { $0 }
            var lag: [Int64] = []
            var sentToSeen: [Int64] = []
            lag.reserveCapacity(writes.count)
            for write in writes {
                guard let arrival = seen[write.sequence] else { continue }
                lag.append(Int64(bitPattern: arrival &- write.answered))
                sentToSeen.append(Int64(arrival - write.sent))
            }
            let early = lag.filter { $0 < 0 }.count
            print("  watch on \(socket): \(lag.count) of \(writes.count) events")
            print(
                "    apply lag, answer on the writer's node to the event here: \(Self.summary(lag)); \(early) arrived before the answer"
            )
            print("    write sent to the event here:                             \(Self.summary(sentToSeen))")
        }
        return 0
    }

    /// "p50 … p99 … max …" of signed nanoseconds, in ms.
    private static func summary(_ values: [Int64]) -> String {
        guard !values.isEmpty else { return "none" }
        let sorted = values.sorted()
        func at(_ fraction: Double) -> String {
            let index = min(sorted.count - 1, max(0, Int((fraction * Double(sorted.count)).rounded(.up)) - 1))
            return String(format: "%.2f ms", Double(sorted[index]) / 1e6)
        }
        return "p50 \(at(0.5))  p99 \(at(0.99))  max \(at(1))"
    }
}
