import FolioClient

/// Slowloris clients (`Slowloris`) and clients streaming over-long lines (`LongLineStreamers`) at
/// once, for `seconds`, while the ordinary clients go on. foliod's memory must stay bounded: what it
/// holds for clients within `--client-memory`, its resident memory within that and some slack, and
/// all of it given back when they leave.
struct SlowClientsStorm {
    static let name = "slow and long lines"
    /// Resident memory foliod may add beyond the client memory budget: allocator overhead, thread
    /// stacks, read buffers.
    static let residentSlackBytes = 64 << 20

    let slowloris: Int
    let longLines: Int
    let seconds: Double
    let byteIntervalSeconds: Double
    /// foliod's `--partial-line-timeout` and `--client-memory`, as it was started with them.
    let lineTimeoutSeconds: Double
    let clientMemoryBytes: Int

    func run(_ bench: LoadContext) throws -> [StormFigure] {
        let storm = "\(slowloris) slowloris + \(longLines) long lines"
        guard
            let maxLine = try FolioConnection(path: bench.socket).request(["op": "hello"]).objectValue?["result"]?
                .objectValue?["maxLine"]?.integerValue
        else { throw BenchError.protocolViolation("hello without maxLine") }

        let sampler = try bench.startSampler(intervalSeconds: 0.5)
        let before = try bench.load(LoadContext.active)
        let quiet = try bench.quietSample()

        let began = MonotonicClock.now()
        let trickling = Slowloris(socket: bench.socket, count: slowloris, byteIntervalSeconds: byteIntervalSeconds)
        try trickling.start()
        let streaming = LongLineStreamers(socket: bench.socket, count: longLines, maxLine: Int(maxLine))
        streaming.start()
        let during = try bench.load(LoadContext.active, seconds: seconds, warmup: 1)
        let slow = trickling.stop()
        let long = streaming.stop()
        let ended = MonotonicClock.now()

        let (released, allReleased) = try bench.waitUntil(timeout: 30) {
            $0.connections <= quiet.connections && $0.descriptors <= quiet.descriptors
        }
        let after = try bench.load(LoadContext.active)
        let end = try bench.quietSample()
        let stormSamples = try bench.stop(sampler).between(began, ended)

        var figures: [StormFigure] = []
        let maxResident = stormSamples.maximum { $0.memory.residentKiB }
        let maxAnonymous = stormSamples.maximum { $0.memory.anonymousKiB }
        let maxClientMemory = stormSamples.maximum(\.clientMemory)
        let residentBound = clientMemoryBytes + Self.residentSlackBytes
        let residentGrowth = (maxResident - quiet.memory.residentKiB) * 1024
        figures.append(
            StormFigure(
                storm, "foliod VmRSS (max during)", before: StormFigure.kibibytes(quiet.memory.residentKiB),
                during: StormFigure.kibibytes(maxResident), after: StormFigure.kibibytes(end.memory.residentKiB),
                check: "during − before ≤ client memory + \(StormFigure.bytes(Self.residentSlackBytes))",
                holds: residentGrowth <= residentBound))
        figures.append(
            StormFigure(
                storm, "foliod RssAnon (max during)", before: StormFigure.kibibytes(quiet.memory.anonymousKiB),
                during: StormFigure.kibibytes(maxAnonymous), after: StormFigure.kibibytes(end.memory.anonymousKiB)))
        figures.append(
            StormFigure(
                storm, "clientMemory (stats, max during)", before: StormFigure.bytes(quiet.clientMemory),
                during: StormFigure.bytes(maxClientMemory), after: StormFigure.bytes(end.clientMemory),
                check: "during ≤ --client-memory \(StormFigure.bytes(clientMemoryBytes)); after ≤ before + 64 KiB",
                holds: maxClientMemory <= clientMemoryBytes && end.clientMemory <= quiet.clientMemory + 65536))
        figures.append(
            StormFigure(
                storm, "connections (stats, max during)", before: "\(quiet.connections)",
                during: "\(stormSamples.maximum(\.connections))", after: "\(released.connections)",
                check: "after = before", holds: allReleased))
        figures.append(
            StormFigure(
                storm, "descriptors (max during)", before: "\(quiet.descriptors)",
                during: "\(stormSamples.maximum(\.descriptors))", after: "\(released.descriptors)",
                check: "after = before", holds: released.descriptors == quiet.descriptors))

        // A slowloris connection lives until the line timeout (checked once a second) has passed.
        let expectedTimeouts = seconds > lineTimeoutSeconds + byteIntervalSeconds + 2 ? slowloris : 0
        let closedSlow = end.slowLinesClosed - quiet.slowLinesClosed
        figures.append(
            StormFigure(
                storm, "slowloris cut by the line timeout",
                during: "\(slow.timedOut.grouped) of \(slow.opened.grouped)",
                after: "slowLinesClosed +\(closedSlow.grouped)",
                check:
                    "each within \(Int(lineTimeoutSeconds)) s + 1 s (≥ \(expectedTimeouts)), other answers: \(slow.closedOtherwise)"
                    + (slow.firstOtherAnswer.map { " (\($0.prefix(80)))" } ?? ""),
                holds: slow.timedOut >= expectedTimeouts && slow.closedOtherwise == 0 && closedSlow >= slow.timedOut))
        let shed = end.connectionsShed - quiet.connectionsShed
        figures.append(
            StormFigure(
                storm, "long lines (\(StormFigure.bytes(2 * Int(maxLine))) each)",
                during: "\(long.lines.grouped) sent, \(StormFigure.bytes(long.bytesSent))",
                after: "too_large \(long.refusedTooLarge.grouped), closed \(long.closedWithoutAnswer.grouped)",
                check: "every one refused; connectionsShed +\(shed)"
                    + (long.firstOtherAnswer.map { ", other: \($0.prefix(80))" } ?? ""),
                holds: long.otherAnswers == 0 && long.lines > 0))
        let ratio = Double(during.p99() ?? 0) / Double(max(1, before.p99() ?? 1))
        figures.append(
            StormFigure(
                storm, "active p99, all requests", before: Report.duration(before.p99()),
                during: Report.duration(during.p99()), after: Report.duration(after.p99()),
                check: "during / before = \(StormFigure.ratio(ratio)) (the attackers share the cores)"))
        figures.append(
            StormFigure(
                storm, "active ops/s", before: Report.rate(before), during: Report.rate(during),
                after: Report.rate(after)))
        let failures = [before, during, after].map(\.tally.failures)
        figures.append(
            StormFigure(
                storm, "active requests failed", before: "\(failures[0])", during: "\(failures[1])",
                after: "\(failures[2])", check: "none", holds: failures.allSatisfy { $0 == 0 }))
        return figures
    }
}
