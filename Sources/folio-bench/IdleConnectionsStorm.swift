/// Many clients connect, send one `hello`, and then hold their connections without reading or
/// sending anything, while the ordinary clients (`LoadContext.active`) go on. Their p99 with the
/// idle connections held must stay within twice their p99 without, measured just before (and again
/// just after) in the same run.
/// Many clients connect, send one `hello`, and then hold their connections without reading or
/// sending anything, while the ordinary clients (`LoadContext.active`) go on. Their p99 with the
/// idle connections held must stay within twice their p99 without. Phases without and with them
/// alternate (`rounds` of each, then one more without), so that a drift of the shared machine hits
/// both sides; each side's phases are merged.
struct IdleConnectionsStorm {
    static let name = "idle connections"
    private static let hello = Array(#"{"op":"hello"}"#.utf8) + [0x0A]

    let count: Int
    let rounds: Int

    func run(_ bench: LoadContext) throws -> [StormFigure] {
        let storm = "\(count.grouped) \(Self.name)"
        let start = try bench.quietSample()
        var without: RunResult?
        var with: RunResult?
        var connectSeconds = 0.0
        var heldSample = start
        var allHeld = true
        var busy = start
        var released = start
        var allReleased = true
        var last: RunResult?
        for round in 0...rounds {
            let before = try bench.load(LoadContext.active)
            without =
                without.map {
                    var merged = $0
                    merged.merge(before)
                    return merged
                } ?? before
            last = before
            guard round < rounds else { break }
            let quiet = try bench.quietSample()

            let connecting = MonotonicClock.now()
            var idle: [SocketStream] = []
            idle.reserveCapacity(count)
            for _ in 0..<count {
                let connection = try SocketStream(path: bench.socket)
                try connection.send(Self.hello)
                idle.append(connection)
            }
            connectSeconds = max(connectSeconds, LoadContext.seconds(connecting, MonotonicClock.now()))
            let held = try bench.waitUntil(timeout: 30) { $0.connections >= quiet.connections + count }
            heldSample = held.0
            allHeld = allHeld && held.held
            let during = try bench.load(LoadContext.active)
            with =
                with.map {
                    var merged = $0
                    merged.merge(during)
                    return merged
                } ?? during
            busy = try bench.sample()

            idle.removeAll()
            let closed = try bench.waitUntil(timeout: 30) {
                $0.connections <= quiet.connections && $0.descriptors <= quiet.descriptors
            }
            released = closed.0
            allReleased = allReleased && closed.held && closed.0.descriptors == quiet.descriptors
        }
        let end = try bench.quietSample()
        guard let before = without, let during = with, let after = last else {
            throw BenchError.setup("no phase ran")
        }
        let quiet = start

        var figures: [StormFigure] = []
        let ratio = Double(during.p99() ?? 0) / Double(max(1, before.p99() ?? 1))
        figures.append(
            StormFigure(
                storm, "active p99, all requests (\(rounds + 1) phases without, \(rounds) with)",
                before: Report.duration(before.p99()),
                during: Report.duration(during.p99()), after: Report.duration(after.p99()),
                check: "with / without = \(StormFigure.ratio(ratio)) ≤ 2 (after: the last phase without)",
                holds: ratio <= 2, isTiming: true))
        for kind in [Operation.Kind.get, .create] {
            figures.append(
                StormFigure(
                    storm, "active p99, \(kind)", before: Report.duration(before.p99(kind)),
                    during: Report.duration(during.p99(kind)), after: Report.duration(after.p99(kind))))
        }
        figures.append(
            StormFigure(
                storm, "active ops/s (\(LoadContext.active.clients) clients)", before: Report.rate(before),
                during: Report.rate(during), after: Report.rate(after),
                check: "during / before = "
                    + StormFigure.ratio(during.operationsPerSecond / max(1, before.operationsPerSecond))))
        let failures = [before, during, after].map(\.tally.failures)
        figures.append(
            StormFigure(
                storm, "active requests failed", before: "\(failures[0])", during: "\(failures[1])",
                after: "\(failures[2])", check: "none", holds: failures.allSatisfy { $0 == 0 }))
        figures.append(
            StormFigure(
                storm, "connections (stats)", before: "\(quiet.connections)", during: "\(heldSample.connections)",
                after: "\(released.connections)", check: "all \(count.grouped) held, then all closed",
                holds: allHeld && allReleased))
        figures.append(
            StormFigure(
                storm, "connections refused (stats)", before: "\(start.connectionsRefused)",
                during: "\(busy.connectionsRefused)", after: "\(end.connectionsRefused)", check: "none",
                holds: end.connectionsRefused == start.connectionsRefused))
        figures.append(
            StormFigure(
                storm, "descriptors (/proc/PID/fd)", before: "\(quiet.descriptors)", during: "\(busy.descriptors)",
                after: "\(released.descriptors)", check: "after = before", holds: allReleased))
        figures.append(
            StormFigure(
                storm, "foliod VmRSS", before: StormFigure.kibibytes(quiet.memory.residentKiB),
                during: StormFigure.kibibytes(busy.memory.residentKiB),
                after: StormFigure.kibibytes(end.memory.residentKiB),
                check: "includes the LMDB pages read (file-backed)"))
        let perConnection = (busy.memory.anonymousKiB - quiet.memory.anonymousKiB) * 1024 / max(1, count)
        figures.append(
            StormFigure(
                storm, "foliod RssAnon", before: StormFigure.kibibytes(quiet.memory.anonymousKiB),
                during: StormFigure.kibibytes(busy.memory.anonymousKiB),
                after: StormFigure.kibibytes(end.memory.anonymousKiB),
                check: "\(StormFigure.bytes(perConnection)) per idle connection"))
        figures.append(
            StormFigure(
                storm, "clientMemory (stats)", before: StormFigure.bytes(quiet.clientMemory),
                during: StormFigure.bytes(busy.clientMemory), after: StormFigure.bytes(end.clientMemory)))
        figures.append(
            StormFigure(
                storm, "time to connect them all", during: Report.seconds(connectSeconds),
                check: "\(Int(Double(count) / max(connectSeconds, 1e-9)).grouped) connections/s"))
        return figures
    }
}
