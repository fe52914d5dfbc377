import Glibc

/// The whole run: checks each daemon answers, pre-populates the keys, then runs every scenario
/// against every daemon, alternating which goes first so slow drifts of the machine hit both.
struct Benchmark {
    let options: BenchOptions
    /// One line per daemon (version and durability settings, as each reported them), and the disk
    /// probe's lines: what the figures were measured against.
    private(set) var context: [String] = []

    init(options: BenchOptions) { self.options = options }

    mutating func run() throws -> Report {
        let probe = options.syncProbeDirectory.map { SyncProbe(directory: $0) }
        if let probe { context.append("disk before: " + (try probe.describe())) }
        for target in options.targets {
            let client = try target.connectWhenReady(timeout: options.connectTimeout)
            context.append(
                "\(target.name): \(try client.describeServer()) on \(target.socketPaths.joined(separator: ", "))"
                    + (target.pids.isEmpty ? "" : ", pid \(target.pids.map(String.init).joined(separator: ","))"))
            let preloader = KeyPreloader(target: target, keyCount: options.keyCount)
            let created = try preloader.preload()
            try preloader.awaitOnEveryNode(timeout: options.connectTimeout)
            progress(
                "\(target.name): keys k0..k\(options.keyCount - 1) " + (created ? "created" : "were there already"))
        }
        let nonce = String(time(nil), radix: 36)
        var runNumber = 0
        var rows: [Report.Row] = []
        for (index, scenario) in options.scenarios.enumerated() {
            var results = [RunResult?](repeating: nil, count: options.targets.count)
            for round in 0..<options.rounds {
                let indices = Array(options.targets.indices)
                for position in (index + round) % 2 == 0 ? indices : indices.reversed() {
                    let target = options.targets[position]
                    runNumber += 1
                    let runner = ScenarioRunner(
                        scenario: scenario, target: target, timing: options.timing, keyCount: options.keyCount,
                        runNumber: runNumber, nonce: nonce)
                    let result = try runner.run()
                    progress("\(scenario.id) \(target.name): \(Report.summary(result))")
                    if var merged = results[position] {
                        merged.merge(result)
                        results[position] = merged
                    } else {
                        results[position] = result
                    }
                }
            }
            rows.append(Report.Row(scenario: scenario, results: results))
        }
        if let probe { context.append("disk after: " + (try probe.describe())) }
        return Report(names: options.targets.map(\.name), rows: rows)
    }

    private func progress(_ line: String) {
        StandardError.write("folio-bench: \(line)")
    }
}
