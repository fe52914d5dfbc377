import FolioClient
import FolioJSON

/// Times one read of foliod beside a Redis command that reads the same position, under each
/// `CPUPlacement` the daemons' pids allow, in 5 rounds per placement: a round times its share of
/// foliod's samples one after another, then Redis's (Redis first in every other round), so that
/// drift in the machine's load hits both alike; each side's p50 is its best round's, its p99 is
/// over every sample of the placement. (Until 2026-12-05 the two alternated sample by sample: with
/// foliod's loops looking for work before they sleep (`--idle-poll`), a Redis request between two
/// of foliod's would put the two daemons on the one vCPU they share in "other CPU" at the same
/// time, which no client of one of them sees.)
struct ReadTimer {
    /// The figures of one read under one placement. Latencies in nanoseconds.
    struct Figures {
        let placement: CPUPlacement
        let folioP50: UInt64
        let folioP99: UInt64
        /// The p50 of the `plan.micros` foliod reported, when the request asked for `explain`.
        let folioServerMicros: Double?
        /// Nil without a Redis command.
        let redisP50: UInt64?
        let redisP99: UInt64?
        /// Redis's `usec_per_call` for the command over the placement's samples.
        let redisServerMicros: Double?

        var ratioP50: Double? { redisP50.map { Double(folioP50) / Double(max($0, 1)) } }
        var ratioP99: Double? { redisP99.map { Double(folioP99) / Double(max($0, 1)) } }
    }

    static let rounds = 5

    let folio: FolioConnection
    let redis: RESPClient?
    /// foliod's and redis-server's pids; empty: reads are timed unpinned only.
    let daemons: [Int32]
    /// Samples per side and placement.
    let samples: Int

    var placements: [CPUPlacement] {
        daemons.isEmpty || !CPUPlacement.isAvailable ? [.unpinned] : CPUPlacement.allCases
    }

    /// Times `folioRequest` (which must succeed) and `redisCommand` (which must not be an error)
    /// under each placement; leaves the daemons unpinned.
    func time(_ folioRequest: JSON, redisCommand: [String]?) throws -> [Figures] {
        var line = folioRequest.serialized()
        line.append(0x0A)
        var figures: [Figures] = []
        for placement in placements {
            try placement.apply(daemons: daemons)
            figures.append(try time(line, redisCommand: redisCommand, placement: placement))
        }
        try CPUPlacement.unpinned.apply(daemons: daemons)
        return figures
    }

    private func time(_ line: [UInt8], redisCommand: [String]?, placement: CPUPlacement) throws -> Figures {
        var folioAll = LatencyHistogram()
        var redisAll = LatencyHistogram()
        var folioBest = UInt64.max
        var redisBest = UInt64.max
        var server: [Double] = []
        let redis = redisCommand == nil ? nil : self.redis
        if let redis { _ = try redis.command(["CONFIG", "RESETSTAT"]) }
        for round in 0..<Self.rounds {
            var folioRound = LatencyHistogram()
            var redisRound = LatencyHistogram()
            let count = max(1, samples / Self.rounds)
            let timeFolio = {
                for _ in 0..<count {
                    let start = MonotonicClock.now()
                    try folio.send(bytes: line)
                    guard let response = try folio.readLine() else { throw BenchError.closed(folio.path) }
                    folioRound.record(MonotonicClock.now() - start)
                    let parsed = try JSONParser.parse(response)
                    guard parsed.objectValue?["ok"] == .bool(true) else {
                        throw BenchError.protocolViolation("\(parsed)")
                    }
                    if let micros = parsed.objectValue?["result"]?.objectValue?["plan"]?.objectValue?["micros"]?
                        .integerValue
                    {
                        server.append(Double(micros))
                    }
                }
            }
            let timeRedis = {
                guard let redis, let redisCommand else { return }
                for _ in 0..<count {
                    let redisStart = MonotonicClock.now()
                    if case .error(let message) = try redis.command(redisCommand) {
                        throw BenchError.protocolViolation(message)
                    }
                    redisRound.record(MonotonicClock.now() - redisStart)
                }
            }
            if round % 2 == 0 {
                try timeFolio()
                try timeRedis()
            } else {
                try timeRedis()
                try timeFolio()
            }
            folioBest = min(folioBest, folioRound.percentile(0.5) ?? .max)
            redisBest = min(redisBest, redisRound.percentile(0.5) ?? .max)
            folioAll.merge(folioRound)
            redisAll.merge(redisRound)
        }
        server.sort()
        return Figures(
            placement: placement, folioP50: folioBest, folioP99: folioAll.percentile(0.99) ?? 0,
            folioServerMicros: server.isEmpty ? nil : server[server.count / 2],
            redisP50: redis == nil ? nil : redisBest, redisP99: redis == nil ? nil : redisAll.percentile(0.99) ?? 0,
            redisServerMicros: try redis.map { try Self.serverMicros($0, command: redisCommand![0]) })
    }

    /// The mean microseconds per call Redis reports for `command` since the last CONFIG RESETSTAT.
    private static func serverMicros(_ redis: RESPClient, command: String) throws -> Double {
        guard case .bulk(let bytes) = try redis.command(["INFO", "commandstats"]) else { return 0 }
        let text = String(decoding: bytes, as: UTF8.self)
        let prefix = "cmdstat_\(command.lowercased()):"
        guard let line = text.split(whereSeparator: \.isNewline).first(where: { $0.hasPrefix(prefix) }),
            let field = line.split(separator: ",").first(where: { $0.hasPrefix("usec_per_call=") })
        else { return 0 }
        return Double(field.dropFirst("usec_per_call=".count)) ?? 0
    }

    /// A latency in nanoseconds as µs, or ms from 1 ms up.
    static func micros(_ nanoseconds: UInt64) -> String { micros(Double(nanoseconds) / 1000) }

    static func micros(_ value: Double) -> String {
        value >= 1000 ? String(format: "%.2f ms", value / 1000) : String(format: "%.1f µs", value)
    }
}
