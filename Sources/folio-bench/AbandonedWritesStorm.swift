import FolioClient

/// `AbandonedWriters` for `seconds`: long writes whose clients leave before the answer. What
/// foliod holds for them must stay within `--client-memory` (1.5 times, and some slack) like any client's,
/// and be given back once the writes are applied. The storm stops early once foliod's heap is
/// `giveUpBytes` over the budget: the bound is broken, and going on would only fill the machine.
struct AbandonedWritesStorm {
    static let name = "abandoned writes"
    static let giveUpBytes = 1 << 30

    let clients: Int
    let seconds: Double
    let clientMemoryBytes: Int

    func run(_ bench: LoadContext) throws -> [StormFigure] {
        let storm = "\(clients) × \(AbandonedWriters.linesPerConnection) long writes, then gone"
        guard
            let maxLine = try FolioConnection(path: bench.socket).request(["op": "hello"]).objectValue?["result"]?
                .objectValue?["maxLine"]?.integerValue
        else { throw BenchError.protocolViolation("hello without maxLine") }
        let quiet = try bench.quietSample()
        let sampler = try bench.startSampler(intervalSeconds: 0.5)
        let writers = AbandonedWriters(socket: bench.socket, count: clients, maxLine: Int(maxLine))
        let began = MonotonicClock.now()
        let deadline = began + MonotonicClock.nanoseconds(seconds: seconds)
        let limitKiB = (clientMemoryBytes + Self.giveUpBytes) / 1024 + quiet.memory.anonymousKiB
        writers.start()
        var gaveUp = false
        while MonotonicClock.now() < deadline {
            MonotonicClock.sleep(until: MonotonicClock.now() + 250_000_000)
            if let latest = sampler.latest, latest.memory.anonymousKiB > limitKiB {
                gaveUp = true
                break
            }
        }
        let lines = writers.stop()
        let ended = MonotonicClock.now()
        // foliod applies what it received before it lets go of it; wait for the log to stop growing.
        var drained = try bench.sample()
        for _ in 0..<240 {
            MonotonicClock.sleep(until: MonotonicClock.now() + 500_000_000)
            let next = try bench.sample()
            defer { drained = next }
            if next.lastSeq == drained.lastSeq && next.connections <= quiet.connections + 1 { break }
        }
        let drainSeconds = LoadContext.seconds(ended, drained.at)
        let samples = try bench.stop(sampler).between(began, ended)
        let end = try bench.quietSample()

        let maxAnonymousKiB = samples.maximum { $0.memory.anonymousKiB }
        let growth = (maxAnonymousKiB - quiet.memory.anonymousKiB) * 1024
        // What `--client-memory` counts is bytes of lines; the heap also holds their decoded form
        // and what glibc's arenas keep between uses (PROTOCOL.md §1: up to about half as much again).
        let bound = clientMemoryBytes * 3 / 2 + SlowClientsStorm.residentSlackBytes
        return [
            StormFigure(
                storm, "foliod RssAnon (max during)", before: StormFigure.kibibytes(quiet.memory.anonymousKiB),
                during: StormFigure.kibibytes(maxAnonymousKiB), after: StormFigure.kibibytes(end.memory.anonymousKiB),
                check:
                    "during − before ≤ 1.5 × client memory + \(StormFigure.bytes(SlowClientsStorm.residentSlackBytes))"
                    + (gaveUp ? "; stopped early, \(StormFigure.bytes(Self.giveUpBytes)) over" : ""),
                holds: growth <= bound),
            StormFigure(
                storm, "clientMemory (stats, max during)", before: StormFigure.bytes(quiet.clientMemory),
                during: StormFigure.bytes(samples.maximum(\.clientMemory)), after: StormFigure.bytes(end.clientMemory),
                check: "connectionsShed +\((end.connectionsShed - quiet.connectionsShed).grouped)"),
            StormFigure(
                storm, "writes",
                during: "\(lines.grouped) lines sent in \(Report.seconds(LoadContext.seconds(began, ended)))",
                after: "\((end.lastSeq - quiet.lastSeq).grouped) events",
                check: "applied within \(Report.seconds(drainSeconds)) of the end"),
        ]
    }
}
