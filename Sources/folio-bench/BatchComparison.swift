import Foundation

/// Atomic batches of `Operation.batchSize` creates against the same number of separate creates,
/// pipelined and one at a time, at 1 and 16 clients (`Scenario.batches`), all against one foliod:
/// each scenario runs once per round, the order reversed from round to round, and the table gives
/// events/s beside the batch's at the same number of clients.
struct BatchComparison {
    let socket: String
    let pid: Int32?
    let timing: ScenarioRunner.Timing
    let rounds: Int

    func run() throws -> TextTable {
        let target = Target(kind: .folio, socketPath: socket, pid: pid)
        let scenarios = Scenario.batches
        var results = [RunResult?](repeating: nil, count: scenarios.count)
        let nonce = String(time(nil), radix: 36)
        var runNumber = 0
        for round in 0..<rounds {
            let indices = Array(scenarios.indices)
            for index in round % 2 == 0 ? indices : indices.reversed() {
                runNumber += 1
                let result = try ScenarioRunner(
                    scenario: scenarios[index], target: target, timing: timing, keyCount: 1, runNumber: runNumber,
                    nonce: nonce
                ).run()
                StandardError.write("folio-bench: \(scenarios[index].id): \(Report.summary(result))")
                if result.tally.failures > 0 {
                    throw BenchError.setup(
                        "\(scenarios[index].id): \(result.tally.failures) failed; first: \(result.tally.firstFailure ?? "?")"
                    )
                }
                if var merged = results[index] {
                    merged.merge(result)
                    results[index] = merged
                } else {
                    results[index] = result
                }
            }
        }
        var table = TextTable(header: [
            "writes", "clients", "requests/s", "events/s", "batch ÷ this", "request p50 / p99", "CPU/event",
        ])
        for (scenario, result) in zip(scenarios, results) {
            guard let result else { continue }
            let events = Double(scenario.writeKind.events)
            let batch = zip(scenarios, results).first {
                $0.0.writeKind == .createBatch && $0.0.clients == scenario.clients
            }?.1
            let batchEvents = (batch?.operationsPerSecond ?? 0) * Double(Operation.batchSize)
            let eventRate = result.operationsPerSecond * events
            table.append([
                scenario.title, "\(scenario.clients)", Report.rate(result), Report.grouped(eventRate),
                eventRate > 0 ? String(format: "%.2f", batchEvents / eventRate) : "-",
                Report.percentiles(result.tally.allLatencies),
                result.cpuMicrosecondsPerOperation.map { String(format: "%.1f µs", $0 / events) } ?? "-",
            ])
        }
        return table
    }
}
