/// Runs one scenario against one daemon: connects its clients, starts a thread per client, samples
/// the daemon's memory while they run and its CPU time (in all, and per thread) over the measured
/// window, then joins them and merges what they counted.
struct ScenarioRunner {
    struct Timing {
        var warmupSeconds: Double
        var durationSeconds: Double
    }

    let scenario: Scenario
    let target: Target
    let timing: Timing
    let keyCount: Int
    /// Numbers this run within the benchmark: seeds its clients and, with the benchmark's nonce,
    /// names its fresh keys so they never repeat.
    let runNumber: Int
    let nonce: String

    func run() throws -> RunResult {
        var loops: [ClientLoop] = []
        for index in 0..<scenario.clients {
            loops.append(
                ClientLoop(
                    client: try target.connect(client: index), scenario: scenario, index: index, keyCount: keyCount,
                    freshPrefix: "w\(nonce)-\(runNumber)-\(index)-",
                    seed: UInt64(runNumber) << 16 | UInt64(index)))
        }
        let start = MonotonicClock.now() + 50_000_000
        let measureFrom = start + MonotonicClock.nanoseconds(seconds: timing.warmupSeconds)
        let window = ClientLoop.Window(
            start: start, measureFrom: measureFrom,
            end: measureFrom + MonotonicClock.nanoseconds(seconds: timing.durationSeconds))
        let threads = loops.enumerated().map { index, loop in ClientThread(name: "bench-\(index)") { loop.run(window) }
        }

        var memory = target.pid.map(MemoryWatch.init(pid:))
        var cpuAtStart: CPUTime?
        while true {
            let now = MonotonicClock.now()
            if now >= window.end { break }
            memory?.sample()
            if cpuAtStart == nil && now >= window.measureFrom {
                cpuAtStart = target.cpu()
            }
            let nextMark = cpuAtStart == nil && target.pid != nil ? window.measureFrom : window.end
            MonotonicClock.sleep(until: min(now + 100_000_000, max(nextMark, now)))
        }
        let cpuAtEnd = target.cpu()
        for thread in threads { thread.join() }
        memory?.sample()

        var tally = Tally()
        for loop in loops { tally.merge(loop.tally) }
        let used = cpuAtStart.flatMap { start in cpuAtEnd.map { $0.since(start) } }
        return RunResult(
            tally: tally, seconds: timing.durationSeconds, memory: memory, cpuSeconds: used?.seconds,
            threadCPU: used?.threads)
    }
}
