import FolioProtocol
import Foundation
import Synchronization

/// A counter that collections can hold (an `Atomic` cannot be copied into one).
final class Counter: Sendable {
    private let value = Atomic<Int>(0)

    func add(_ amount: Int = 1) { value.add(amount, ordering: .relaxed) }
    /// For a counter only one thread adds to: a plain load and store, no locked instruction.
    func bump(_ amount: Int = 1) { value.store(value.load(ordering: .relaxed) &+ amount, ordering: .relaxed) }
    var current: Int { value.load(ordering: .relaxed) }
}

/// A Prometheus histogram: counts by upper bound, their sum, their number. Lock-free to record.
final class Histogram: Sendable {
    /// Upper bounds, in the unit the name says.
    let bounds: [Double]
    private let counts: [Counter]
    private let sumMicros = Atomic<Int>(0)
    private let total = Atomic<Int>(0)

    init(bounds: [Double]) {
        self.bounds = bounds
        counts = (0...bounds.count).map { _ in Counter() }
    }

    /// Latencies: 50 µs to 10 s.
    static func seconds() -> Histogram {
        Histogram(bounds: [
            0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
        ])
    }

    func record(_ value: Double) {
        let index = bounds.firstIndex { value <= $0 } ?? bounds.count
        counts[index].add()
        sumMicros.add(Int((value * 1_000_000).rounded()), ordering: .relaxed)
        total.add(1, ordering: .relaxed)
    }

    /// `record` for a histogram only one thread records into (an event loop's shard).
    func recordFromOwner(micros: Int) {
        let value = Double(micros) / 1_000_000
        let index = bounds.firstIndex { value <= $0 } ?? bounds.count
        counts[index].bump()
        sumMicros.store(sumMicros.load(ordering: .relaxed) &+ micros, ordering: .relaxed)
        total.store(total.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
    }

    /// The sum of histograms of the same bounds.
    static func merged(_ parts: [Histogram]) -> (cumulative: [Int], sum: Double, count: Int) {
        var result: (cumulative: [Int], sum: Double, count: Int) = ([], 0, 0)
        for part in parts {
            let snapshot = part.snapshot
            result.cumulative =
                result.cumulative.isEmpty ? snapshot.cumulative : zip(result.cumulative, snapshot.cumulative).map(+)
            result.sum += snapshot.sum
            result.count += snapshot.count
        }
        return result
    }

    /// Cumulative counts per bound (then +Inf), the sum, the count.
    var snapshot: (cumulative: [Int], sum: Double, count: Int) {
        var running = 0
        let cumulative = counts.map { counter -> Int in
            running += counter.current
            return running
        }
        return (cumulative, Double(sumMicros.load(ordering: .relaxed)) / 1_000_000, total.load(ordering: .relaxed))
    }
}

/// What foliod counts for `metrics` (Prometheus text exposition): requests by op and outcome,
/// their latency by op, the writer's batches, commits and flushes, refusals by cause.
final class Metrics: Sendable {
    static let outcomes = ["ok"] + ErrorCode.allCases.map(\.rawValue)
    /// The ops of the table, and `invalid` for lines that name none.
    static let ops = OperationTable.names + ["invalid"]

    /// Requests by op and outcome, and their latency by op, in one shard per event loop: each loop
    /// counts into its own, without locked instructions or cache lines shared with the other loops
    /// (they cost pipelined gets a quarter of their throughput when every loop counted into one).
    let shards: [RequestShard]

    final class RequestShard: Sendable {
        /// By `op * outcomes.count + outcome`.
        let counts: [Counter]
        /// By op.
        let latency: [Histogram]

        init() {
            counts = (0..<(Metrics.ops.count * Metrics.outcomes.count)).map { _ in Counter() }
            latency = Metrics.ops.map { _ in Histogram.seconds() }
        }
    }

    /// `ops` are the table's in its order (`OperationSpec.index`), then `invalid`.
    static let invalidOp = ops.count - 1
    static let outcomeIndex = Dictionary(
        uniqueKeysWithValues: ErrorCode.allCases.enumerated().map { ($0.element, $0.offset + 1) })

    let batchWrites = Histogram(bounds: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024])
    let commitSeconds = Histogram.seconds()
    let syncSeconds = Histogram.seconds()

    enum Refusal: String, CaseIterable {
        case maxConnections = "max-connections"
        case noDescriptor = "no-descriptor"
        case forbidden
        case clientMemory = "client-memory"
        case partialLineTimeout = "partial-line-timeout"
        case idleTimeout = "idle-timeout"
        case maxOutput = "max-output"
        case lagging
        case lineTooLong = "max-line"
    }

    let refusals: [String: Counter]

    init(shards: Int = 1) {
        self.shards = (0..<max(1, shards)).map { _ in RequestShard() }
        var refusals: [String: Counter] = [:]
        for refusal in Refusal.allCases { refusals[refusal.rawValue] = Counter() }
        self.refusals = refusals
    }

    /// One request answered on event loop `shard` (that loop's thread only): its op (`index(ofOp:)`),
    /// its outcome (nil: ok), how long it took.
    func request(op: Int, outcome: ErrorCode?, micros: Int, shard: Int) {
        let part = shards[shard % shards.count]
        let outcomeIndex = outcome.map { Self.outcomeIndex[$0] ?? 0 } ?? 0
        part.counts[op * Self.outcomes.count + outcomeIndex].bump()
        part.latency[op].recordFromOwner(micros: micros)
    }

    /// Requests of op and outcome (positions in `ops` and `outcomes`) answered so far, on every loop.
    func requestCount(op: Int, outcome: Int) -> Int {
        shards.reduce(0) { $0 + $1.counts[op * Self.outcomes.count + outcome].current }
    }

    func latency(op: Int) -> (cumulative: [Int], sum: Double, count: Int) {
        Histogram.merged(shards.map { $0.latency[op] })
    }

    func refused(_ cause: Refusal, count: Int = 1) { refusals[cause.rawValue]?.add(count) }
}

/// Prometheus text, version 0.0.4.
struct MetricsText {
    private(set) var text = ""

    mutating func family(_ name: String, _ type: String, _ help: String) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }

    mutating func sample(_ name: String, _ labels: [(String, String)] = [], _ value: Double) {
        text += name
        if !labels.isEmpty {
            text += "{" + labels.map { "\($0.0)=\"\(Self.escaped($0.1))\"" }.joined(separator: ",") + "}"
        }
        text += " " + (value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)) + "\n"
    }

    mutating func histogram(_ name: String, _ labels: [(String, String)], _ histogram: Histogram) {
        self.histogram(name, labels, bounds: histogram.bounds, histogram.snapshot)
    }

    mutating func histogram(
        _ name: String, _ labels: [(String, String)], bounds: [Double],
        _ snapshot: (cumulative: [Int], sum: Double, count: Int)
    ) {
        let (cumulative, sum, count) = snapshot
        for (index, bound) in bounds.enumerated() {
            sample(name + "_bucket", labels + [("le", String(bound))], Double(cumulative[index]))
        }
        sample(name + "_bucket", labels + [("le", "+Inf")], Double(cumulative.last ?? 0))
        sample(name + "_sum", labels, sum)
        sample(name + "_count", labels, Double(count))
    }

    private static func escaped(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }
}
