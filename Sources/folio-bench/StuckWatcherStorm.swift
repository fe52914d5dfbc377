/// Watchers that never read, while writers update records as fast as they can: one asks for new
/// events only (it falls behind live), one for the whole log from sequence 0 (it is stuck in its
/// catch-up). foliod must cut each off (`lagging`) instead of queueing for it, and the writers'
/// throughput must not suffer: compared with the same writers just before, without them.
struct StuckWatcherStorm {
    static let name = "stuck watcher"
    /// 16 connections of durable updates of existing keys: the store keeps its size, so `stats`
    /// (sampled here, and whose digest is a pass over the store) costs the same in every phase.
    static let writers = Scenario(
        id: "writers", title: "durable update", clients: 16, depth: 1, readPercent: 0, writeKind: .update)
    /// What foliod may hold for one watcher: a connection's output allowance (`PROTOCOL.md` §1).
    static let allowanceBytes = 16 << 20
    static let maximumPhases = 6

    /// A connection with one watch that it does not read until told to.
    private final class StuckWatcher {
        let title: String
        let tag: String
        private(set) var stream: SocketStream?
        private let eventPrefix: [UInt8]
        private let watchingPrefix: [UInt8]

        init(title: String, tag: String, after: Int, socket: String) throws {
            self.title = title
            self.tag = tag
            eventPrefix = Array(#"{"tag":"\#(tag)","event":{"seq":"#.utf8)
            watchingPrefix = Array(#"{"tag":"\#(tag)","ok":true"#.utf8)
            // The smallest receive buffer the kernel allows, so that it falls behind at once.
            let stream = try SocketStream(path: socket, receiveBufferBytes: 4096)
            try stream.send(Array(#"{"op":"watch","tag":"\#(tag)","after":\#(after)}"#.utf8) + [0x0A])
            self.stream = stream
        }

        /// Reads at last: the events foliod had sent, then the line that ended the watch; or, if it
        /// was never cut off, every event up to `lastSeq`. Then closes the connection.
        func readToEnd(lastSeq: Int) throws -> (events: Int, ending: String?) {
            var events = 0
            var lastEvent: Int64 = 0
            var ending: String?
            while let stream, ending == nil && lastEvent < Int64(lastSeq) {
                try stream.withLine { line in
                    if line.starts(with: eventPrefix) {
                        events += 1
                        lastEvent = WatchBenchmark.integer(after: Array(#""seq":"#.utf8), in: Array(line)) ?? lastEvent
                    } else if !line.starts(with: watchingPrefix) {
                        ending = String(decoding: line, as: UTF8.self)
                    }
                }
            }
            stream = nil
            return (events, ending)
        }

        func isLagging(_ ending: String?) -> Bool {
            ending?.contains(#""code":"lagging""#) == true && ending?.hasPrefix(#"{"tag":"\#(tag)""#) == true
        }
    }

    func run(_ bench: LoadContext) throws -> [StormFigure] {
        let storm = Self.name
        let sampler = try bench.startSampler(intervalSeconds: 0.25)
        let beforeStart = MonotonicClock.now()
        let before = try bench.load(Self.writers)
        let quiet = try bench.quietSample()

        let watchers = [
            try StuckWatcher(title: "new events", tag: "live", after: quiet.lastSeq, socket: bench.socket),
            try StuckWatcher(title: "from seq 0", tag: "log", after: 0, socket: bench.socket),
        ]
        let (watching, started) = try bench.waitUntil(timeout: 10) { $0.watches >= quiet.watches + watchers.count }
        let stuckFrom = watching.at
        // At least a phase, and on until both watchers are cut off (each must fall behind by the
        // watch buffer, 8 MiB by default: longer when the machine writes slowly), at most 6 phases.
        var during = try bench.load(Self.writers)
        for _ in 1..<Self.maximumPhases {
            guard let latest = sampler.latest, latest.watches > quiet.watches else { break }
            during.merge(try bench.load(Self.writers))
        }
        let busy = try bench.sample()
        let endings = try watchers.map { try $0.readToEnd(lastSeq: busy.lastSeq) }
        let after = try bench.load(Self.writers)
        let end = try bench.quietSample()
        let samples = try bench.stop(sampler)

        // When watches ended, from the samples taken before the watchers read (reading lets a
        // watch catch up; closing its connection ends it too); events/s from lastSeq between samples.
        let stuckSamples = samples.between(stuckFrom, busy.at)
        var cuts: [Double] = []
        for (previous, next) in zip(stuckSamples, stuckSamples.dropFirst()) where next.watches < previous.watches {
            for _ in 0..<(previous.watches - next.watches) { cuts.append(LoadContext.seconds(stuckFrom, next.at)) }
        }
        func eventRate(_ from: UInt64, _ to: UInt64) -> Double {
            let window = samples.between(from, to)
            guard let first = window.first, let last = window.last, last.at > first.at else { return 0 }
            return Double(last.lastSeq - first.lastSeq) / LoadContext.seconds(first.at, last.at)
        }
        let rateBefore = eventRate(beforeStart, quiet.at)
        let rateStuck = eventRate(stuckFrom, busy.at)

        var figures: [StormFigure] = []
        let ratio = during.operationsPerSecond / max(1, before.operationsPerSecond)
        figures.append(
            StormFigure(
                storm, "writer ops/s (\(Self.writers.clients) clients, durable update)", before: Report.rate(before),
                during: Report.rate(during), after: Report.rate(after),
                check: "during / before = \(StormFigure.ratio(ratio)) ≥ 0.5", holds: ratio >= 0.5, isTiming: true))
        figures.append(
            StormFigure(
                storm, "events/s (stats lastSeq)", before: "\(Int(rateBefore).grouped)",
                during: "\(Int(rateStuck).grouped)",
                check: "during / before = \(StormFigure.ratio(rateStuck / max(1, rateBefore)))"))
        figures.append(
            StormFigure(
                storm, "writer p99", before: Report.duration(before.p99()), during: Report.duration(during.p99()),
                after: Report.duration(after.p99())))
        figures.append(
            StormFigure(
                storm, "watches (stats)", before: "\(quiet.watches)", during: "\(watching.watches)",
                after: "\(end.watches)",
                check: "ended after "
                    + (cuts.isEmpty ? "none" : cuts.map { Report.seconds($0) }.joined(separator: ", ")),
                holds: started))
        for (watcher, (events, ending)) in zip(watchers, endings) {
            let lagging = watcher.isLagging(ending)
            figures.append(
                StormFigure(
                    storm, "watcher \(watcher.title) cut off",
                    during: "\(events.grouped) events read",
                    after: lagging ? "then lagging" : ending.map { "then \($0.prefix(60))" } ?? "not cut: caught up",
                    check: "its last line is lagging", holds: lagging))
        }
        let maxClientMemory = stuckSamples.maximum(\.clientMemory)
        let allowance = watchers.count * Self.allowanceBytes
        figures.append(
            StormFigure(
                storm, "clientMemory (max while stuck)", before: StormFigure.bytes(quiet.clientMemory),
                during: StormFigure.bytes(maxClientMemory), after: StormFigure.bytes(end.clientMemory),
                check: "during − before ≤ \(StormFigure.bytes(allowance)) (their connections' output)",
                holds: maxClientMemory - quiet.clientMemory <= allowance))
        figures.append(
            StormFigure(
                storm, "foliod RssAnon (max while stuck)", before: StormFigure.kibibytes(quiet.memory.anonymousKiB),
                during: StormFigure.kibibytes(stuckSamples.maximum { $0.memory.anonymousKiB }),
                after: StormFigure.kibibytes(end.memory.anonymousKiB)))
        let failures = [before, during, after].map(\.tally.failures)
        figures.append(
            StormFigure(
                storm, "writes failed", before: "\(failures[0])", during: "\(failures[1])", after: "\(failures[2])",
                check: "none", holds: failures.allSatisfy { $0 == 0 }))
        return figures
    }
}
