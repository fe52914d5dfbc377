import FolioHarness

/// One client of a run: over its own connection it sends its scenario's requests back to back
/// (closed loop: the next batch only once the last is answered) from `start` until `end`, and
/// tallies those answered within the measured window. Owned by its thread while it runs; the runner
/// reads `tally` after joining that thread.
final class ClientLoop: @unchecked Sendable {
    struct Window {
        let start: UInt64
        /// Answers before this are warm-up: checked for errors, not timed.
        let measureFrom: UInt64
        let end: UInt64
    }

    private let client: any LoadClient
    private let scenario: Scenario
    private let keyCount: Int
    /// Fresh keys are this prefix and a serial number, unique to this client of this run.
    private let freshPrefix: [UInt8]
    private var random: SplitMix64
    private(set) var tally = Tally()

    /// Open loop: nanoseconds between this client's batches, and where in that interval its first
    /// one goes, so that the clients' batches interleave instead of leaving together.
    private let pace: (interval: UInt64, offset: UInt64)?

    /// `index` is this client's place among the scenario's clients (for an open loop's schedule).
    init(client: any LoadClient, scenario: Scenario, index: Int, keyCount: Int, freshPrefix: String, seed: UInt64) {
        self.client = client
        self.scenario = scenario
        self.keyCount = keyCount
        self.freshPrefix = Array(freshPrefix.utf8)
        random = SplitMix64(seed: seed)
        pace = scenario.requestsPerSecond.map { rate in
            let interval = UInt64(Double(scenario.clients * scenario.depth) / rate * 1e9)
            return (interval, interval * UInt64(index) / UInt64(max(1, scenario.clients)))
        }
    }

    /// Latency is from sending a batch to each answer's arrival: for depth 1 the request's round
    /// trip, in a pipeline the i-th answer's wait behind the i-1 before it. In an open loop it is
    /// from the batch's scheduled time, so a batch sent late because the last one was slow still
    /// counts the wait it had.
    func run(_ window: Window) {
        var scheduled = window.start + (pace?.offset ?? 0)
        MonotonicClock.sleep(until: scheduled)
        var batch: [Operation] = []
        batch.reserveCapacity(scenario.depth)
        var serial = 0
        var finished = false
        while !finished {
            batch.removeAll(keepingCapacity: true)
            for _ in 0..<scenario.depth { batch.append(nextOperation(serial: &serial)) }
            let sent: UInt64
            if let pace {
                MonotonicClock.sleep(until: scheduled)
                sent = scheduled
                scheduled += pace.interval
                if scheduled >= window.end { finished = true }
            } else {
                sent = MonotonicClock.now()
            }
            do {
                try client.send(batch)
                for operation in batch {
                    let reply = try client.receive()
                    let answered = MonotonicClock.now()
                    if answered >= window.end { finished = true }
                    switch reply {
                    case .success:
                        if answered >= window.measureFrom && answered < window.end {
                            tally.record(operation.kind, latency: answered - sent)
                        }
                    case .failure(let message):
                        tally.fail("\(operation.kind) \(operation.key): \(message)")
                    }
                }
            } catch {
                tally.fail("connection lost: \(error)")
                return
            }
        }
    }

    private func nextOperation(serial: inout Int) -> Operation {
        if scenario.readPercent == 100 || (scenario.readPercent > 0 && Int(random.next() % 100) < scenario.readPercent)
        {
            return Operation(kind: .get, key: existingKey())
        }
        if scenario.writeKind == .update { return Operation(kind: .update, key: existingKey()) }
        serial += 1
        return Operation(kind: scenario.writeKind, key: Key(prefix: freshPrefix, number: serial))
    }

    private func existingKey() -> Key { .existing(Int(random.next() % UInt64(keyCount))) }
}
