import FolioClient
import FolioHarness
import FolioJSON
import Foundation

/// Deletes that cascade over owned objects: a Box whose field `parts` (an array of references with
/// `owns: true`) holds N Parts is deleted, which deletes every Part in the same command, one event
/// each. Meanwhile a reader on another connection gets objects at a steady rate; its latencies while
/// each delete was in flight are set beside those of a quiet second just before it.
struct CascadeProbe {
    /// The reader's keys: `Bench` objects `k0 ..< k(readKeys)`, created first if missing.
    static let readKeys = 10_000

    let socket: String
    let cascades: Int
    let owned: Int
    let readRate: Int

    func run() throws -> [String] {
        let folio = try FolioConnection(path: socket)
        try expectOK(
            folio.request([
                "op": "schema.define", "collection": "Box",
                "fields": ["parts": ["type": "array", "items": ["type": "ref", "ref": "Part"], "owns": true]],
            ]), "schema.define Box")
        let target = Target(kind: .folio, socketPath: socket, pid: nil)
        _ = try KeyPreloader(target: target, keyCount: Self.readKeys).preload()

        let reader = PacedReader(client: try target.connect(), interval: UInt64(1e9 / Double(readRate)))
        let thread = ClientThread(name: "bench-reader") { reader.run() }
        let outcome = Result { try deleteOwners(folio) }
        reader.stop()
        thread.join()
        var (lines, quiet, inFlight) = try outcome.get()
        if let failure = reader.failure { throw BenchError.setup("reader: \(failure)") }
        var during = LatencyHistogram()
        var without = LatencyHistogram()
        for (sent, latency) in reader.samples {
            if inFlight.contains(where: { sent < $0.1 && sent + latency > $0.0 }) {
                during.record(latency)
            } else if quiet.contains(where: { sent >= $0.0 && sent < $0.1 }) {
                without.record(latency)
            }
        }
        func figures(_ histogram: LatencyHistogram) -> String {
            "\(histogram.count) gets, p50 \(Report.duration(histogram.percentile(0.5))), p99 \(Report.duration(histogram.percentile(0.99))), "
                + "max \(Report.duration(histogram.maximum))"
        }
        lines.append(
            "gets on another connection (paced at \(readRate)/s) while a cascade was in flight: " + figures(during))
        lines.append("the same in the quiet second before each cascade: " + figures(without))
        return lines
    }

    /// Creates and deletes each owner in turn: the lines to print, the quiet windows and the deletes' windows.
    private func deleteOwners(_ folio: FolioConnection) throws -> (
        lines: [String], quiet: [(UInt64, UInt64)], inFlight: [(UInt64, UInt64)]
    ) {
        var quiet: [(UInt64, UInt64)] = []
        var inFlight: [(UInt64, UInt64)] = []
        var lines: [String] = []
        for round in 0..<cascades {
            let owned = self.owned
            try PipelinedLoader(socket: socket, count: owned, connections: 2) { k in
                #"{"op":"create","collection":"Part","id":"p\#(round)-\#(k)","data":{"n":\#(k)}}"#
            }.load()
            let parts = (0..<owned).map { JSON.object(["$ref": .string("Part/p\(round)-\($0)")]) }
            try expectOK(
                folio.request([
                    "op": "create", "collection": "Box", "id": .string("b\(round)"), "data": ["parts": .array(parts)],
                ]), "create Box")
            MonotonicClock.sleep(until: MonotonicClock.now() + 200_000_000)
            let quietStart = MonotonicClock.now()
            MonotonicClock.sleep(until: quietStart + 1_000_000_000)
            quiet.append((quietStart, MonotonicClock.now()))

            let before = try lastSequence(folio)
            let start = MonotonicClock.now()
            try expectOK(
                folio.request(["op": "delete", "collection": "Box", "id": .string("b\(round)")]), "delete Box")
            let end = MonotonicClock.now()
            inFlight.append((start, end))
            let events = try lastSequence(folio) - before
            let left = try folio.request(["op": "count", "collection": "Part"]).objectValue?["result"]?.objectValue?[
                "count"]?.integerValue
            guard events == Int64(owned + 1), left == 0 else {
                throw BenchError.protocolViolation(
                    "deleting Box/b\(round) wrote \(events) events and left \(left ?? -1) Parts; expected \(owned + 1) and 0"
                )
            }
            let seconds = Double(end - start) / 1e9
            lines.append(
                "cascade \(round + 1): delete of a Box owning \(owned) Parts: \(String(format: "%.0f", seconds * 1000)) ms for \(events) events "
                    + "(\(Int(Double(events) / seconds)) events/s), one durable commit")
            MonotonicClock.sleep(until: MonotonicClock.now() + 200_000_000)
        }
        return (lines, quiet, inFlight)
    }

    private func lastSequence(_ folio: FolioConnection) throws -> Int64 {
        guard let seq = folio.requestResult(["op": "hello"])?["lastSeq"]?.integerValue else {
            throw BenchError.protocolViolation("hello without lastSeq")
        }
        return seq
    }

    private func expectOK(_ answer: JSON, _ what: String) throws {
        guard answer.objectValue?["ok"] == .bool(true) else { throw BenchError.protocolViolation("\(what): \(answer)") }
    }
}

/// Gets random keys of `Bench` one at a time, starting one every `interval` nanoseconds (or as soon
/// as the last is answered, when it took longer), and keeps each one's send time and latency.
/// `samples` and `failure` are read after the thread running `run` has been joined.
final class PacedReader: @unchecked Sendable {
    private let client: any LoadClient
    private let interval: UInt64
    private let stopped = Locked(false)
    private(set) var samples: [(sent: UInt64, latency: UInt64)] = []
    private(set) var failure: String?

    init(client: any LoadClient, interval: UInt64) {
        self.client = client
        self.interval = interval
    }

    func stop() { stopped.withLock { $0 = true } }

    func run() {
        var random = SplitMix64(seed: 7)
        var next = MonotonicClock.now()
        while !stopped.withLock({ $0 }) {
            MonotonicClock.sleep(until: next)
            let sent = MonotonicClock.now()
            next = sent + interval
            do {
                try client.send([
                    Operation(kind: .get, key: .existing(Int(random.next() % UInt64(CascadeProbe.readKeys))))
                ])
                if case .failure(let message) = try client.receive() {
                    failure = message
                    return
                }
            } catch {
                failure = "\(error)"
                return
            }
            samples.append((sent, MonotonicClock.now() - sent))
        }
    }
}
