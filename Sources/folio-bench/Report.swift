import Foundation

/// Turns the results into the tables the benchmark prints: throughput and latency side by side,
/// then failures and the daemons' CPU time and memory, then latency per kind of request. The first
/// daemon is the one measured; each ratio is its figure over another's in the same run (with more than
/// one peer, a column per peer, headed `Folio/Redis`, `Folio/SQLite`).
struct Report {
    struct Row {
        let scenario: Scenario
        /// One per daemon, in the order of `names`; nil for a daemon the scenario did not run on.
        let results: [RunResult?]
    }

    /// The daemons, as the tables name them (`Folio`, `Redis`, `Folio before`).
    let names: [String]
    let rows: [Row]

    var throughput: TextTable {
        let peers = names.indices.dropFirst()
        var table = TextTable(
            header: ["scenario", "clients"] + names.map { "\($0) ops/s" }
                + peers.map { names.count == 2 ? "ratio" : "\(names[0])/\(names[$0])" }
                + names.map { "\($0) p50 / p99" })
        for row in rows {
            let ratios = peers.map { peer -> String in
                guard let first = row.results[0], let other = row.results[peer], other.operationsPerSecond > 0 else {
                    return "-"
                }
                return String(format: "%.2f", first.operationsPerSecond / other.operationsPerSecond)
            }
            table.append(
                [row.scenario.title, "\(row.scenario.clients)"] + row.results.map(Self.rate) + ratios
                    + row.results.map { Self.percentiles($0?.tally.allLatencies) })
        }
        return table
    }

    var failuresAndResources: TextTable {
        var table = TextTable(
            header: ["scenario", "clients"] + names.map { "\($0) failed" } + names.map { "\($0) CPU/op" }
                + names.flatMap { ["\($0) RSS max (anon)", "\($0) VmHWM"] })
        for row in rows {
            table.append(
                [row.scenario.title, "\(row.scenario.clients)"] + row.results.map(Self.failures)
                    + row.results.map(Self.cpu)
                    + row.results.flatMap { [Self.residentMemory($0?.memory), Self.mebibytes($0?.memory?.peakKiB)] })
        }
        return table
    }

    var latencyByKind: TextTable {
        var table = TextTable(
            header: ["scenario", "clients", "request", "system", "count", "p50", "p99", "p99.9", "max"], leftAligned: 4)
        for row in rows {
            for (name, result) in zip(names, row.results) {
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
            zip(names, row.results).compactMap { name, result in
                guard let threads = result?.threadCPU else { return nil }
                return "\(row.scenario.id) \(name): \(threads.summary())"
            }
        }
    }

    var failureMessages: [String] {
        rows.flatMap { row in
            zip(names, row.results).compactMap { name, result in
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
        return grouped(result.operationsPerSecond)
    }

    /// 12345.6 as "12,346".
    static func grouped(_ value: Double) -> String {
        let digits = Array(String(Int(value.rounded())))
        var grouped = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { grouped.append(",") }
            grouped.append(digit)
        }
        return grouped
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
