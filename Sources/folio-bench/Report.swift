import Foundation

/// Turns the results into the tables the benchmark prints: throughput and latency side by side,
/// then failures and the daemons' CPU time and memory, then latency per kind of request.
struct Report {
    struct Row {
        let scenario: Scenario
        let folio: RunResult?
        let redis: RunResult?
    }

    let rows: [Row]

    var throughput: TextTable {
        var table = TextTable(header: [
            "scenario", "clients", "Folio ops/s", "Redis ops/s", "ratio", "Folio p50 / p99", "Redis p50 / p99",
        ])
        for row in rows {
            let ratio: String
            if let folio = row.folio, let redis = row.redis, redis.operationsPerSecond > 0 {
                ratio = String(format: "%.2f", folio.operationsPerSecond / redis.operationsPerSecond)
            } else {
                ratio = "-"
            }
            table.append([
                row.scenario.title, "\(row.scenario.clients)", Self.rate(row.folio), Self.rate(row.redis), ratio,
                Self.percentiles(row.folio?.tally.allLatencies), Self.percentiles(row.redis?.tally.allLatencies),
            ])
        }
        return table
    }

    var failuresAndResources: TextTable {
        var table = TextTable(header: [
            "scenario", "clients", "Folio failed", "Redis failed", "Folio CPU/op", "Redis CPU/op",
            "Folio RSS max (anon)", "Folio VmHWM",
            "Redis RSS max (anon)", "Redis VmHWM",
        ])
        for row in rows {
            table.append([
                row.scenario.title, "\(row.scenario.clients)", Self.failures(row.folio), Self.failures(row.redis),
                Self.cpu(row.folio), Self.cpu(row.redis),
                Self.residentMemory(row.folio?.memory), Self.mebibytes(row.folio?.memory?.peakKiB),
                Self.residentMemory(row.redis?.memory), Self.mebibytes(row.redis?.memory?.peakKiB),
            ])
        }
        return table
    }

    var latencyByKind: TextTable {
        var table = TextTable(
            header: ["scenario", "clients", "request", "system", "count", "p50", "p99", "p99.9", "max"], leftAligned: 4)
        for row in rows {
            for (name, result) in [("Folio", row.folio), ("Redis", row.redis)] {
                guard let result else { continue }
                for kind in Operation.Kind.allCases {
                    let latencies = result.tally.latencies(of: kind)
                    guard latencies.count > 0 else { continue }
                    table.append([
                        row.scenario.title, "\(row.scenario.clients)", "\(kind)", name, "\(latencies.count)",
                        Self.duration(latencies.percentile(0.5)), Self.duration(latencies.percentile(0.99)),
                        Self.duration(latencies.percentile(0.999)), Self.duration(latencies.maximum),
                    ])
                }
            }
        }
        return table
    }

    /// Where each daemon's CPU time went, per scenario (measured windows, all rounds).
    var cpuByThread: [String] {
        rows.flatMap { row in
            [("Folio", row.folio), ("Redis", row.redis)].compactMap { name, result in
                guard let threads = result?.threadCPU else { return nil }
                return "\(row.scenario.id) \(name): \(threads.summary())"
            }
        }
    }

    var failureMessages: [String] {
        rows.flatMap { row in
            [("Folio", row.folio), ("Redis", row.redis)].compactMap { name, result in
                guard let result, result.tally.failures > 0 else { return nil }
                return
                    "\(name), \(row.scenario.id): \(result.tally.failures) failed; first: \(result.tally.firstFailure ?? "?")"
            }
        }
    }

    /// One line for a run: throughput, latency, failures, CPU and memory of the daemon.
    static func summary(_ result: RunResult) -> String {
        "\(rate(result)) ops/s, p50/p99 \(percentiles(result.tally.allLatencies)), \(result.tally.failures) failed, "
            + "CPU/op \(cpu(result)), RSS max (anon) \(residentMemory(result.memory))"
            + (result.threadCPU.map { "; CPU by thread: \($0.summary())" } ?? "")
    }

    static func rate(_ result: RunResult?) -> String {
        guard let result else { return "-" }
        return Int(result.operationsPerSecond.rounded()).grouped
    }

    static func percentiles(_ latencies: LatencyHistogram?) -> String {
        guard let latencies, latencies.count > 0 else { return "-" }
        return "\(duration(latencies.percentile(0.5))) / \(duration(latencies.percentile(0.99)))"
    }

    /// Microseconds below 1 ms, milliseconds above.
    static func duration(_ nanoseconds: UInt64?) -> String {
        guard let nanoseconds else { return "-" }
        let microseconds = Double(nanoseconds) / 1000
        switch microseconds {
        case ..<100: return String(format: "%.1f µs", microseconds)
        case ..<1000: return String(format: "%.0f µs", microseconds)
        case ..<10_000: return String(format: "%.2f ms", microseconds / 1000)
        default: return String(format: "%.1f ms", microseconds / 1000)
        }
    }

    static func cpu(_ result: RunResult?) -> String {
        guard let microseconds = result?.cpuMicrosecondsPerOperation else { return "-" }
        return String(format: "%.1f µs", microseconds)
    }

    static func seconds(_ value: Double) -> String { String(format: "%.2f s", value) }

    static func failures(_ result: RunResult?) -> String {
        guard let result else { return "-" }
        return "\(result.tally.failures)"
    }

    /// The most resident memory seen, with the most of it that was anonymous (heap, not mapped files).
    static func residentMemory(_ memory: MemoryWatch?) -> String {
        guard let memory, memory.maxResidentKiB > 0 else { return "-" }
        return "\(mebibytes(memory.maxResidentKiB)) (\(mebibytes(memory.maxAnonymousKiB)))"
    }

    static func mebibytes(_ kib: Int?) -> String {
        guard let kib, kib > 0 else { return "-" }
        return String(format: "%.1f MiB", Double(kib) / 1024)
    }
}
