/// Creates the keys `k0 ..< kN` that read scenarios look up, with the benchmark's payload, in
/// pipelined batches over one connection, in order. A daemon reused from an earlier run that already
/// has the last key is left alone; a Folio id that already exists is left as it is.
struct KeyPreloader {
    static let batchSize = 256

    let target: Target
    let keyCount: Int

    /// Returns false when the keys were there already.
    func preload() throws -> Bool {
        let client = try target.connect()
        try client.send([Operation(kind: .get, key: .existing(keyCount - 1))])
        if case .success = try client.receive() { return false }
        var next = 0
        while next < keyCount {
            let batch = (next..<min(next + Self.batchSize, keyCount)).map {
                Operation(kind: .createNamed, key: .existing($0))
            }
            try client.send(batch)
            for operation in batch {
                if case .failure(let message) = try client.receive(), !isExistingKey(message) {
                    throw BenchError.setup("\(target.name): pre-populating \(operation.key) failed: \(message)")
                }
            }
            next += batch.count
        }
        return true
    }

    /// Waits until every socket of the target answers a get of the last key: the other nodes of a
    /// cluster apply the keys from the shared log a little after the first answered them, and they
    /// apply in order, so the last one there means every one is.
    func awaitOnEveryNode(timeout: Double) throws {
        let deadline = MonotonicClock.now() + MonotonicClock.nanoseconds(seconds: timeout)
        for index in target.socketPaths.indices.dropFirst() {
            let client = try target.connect(client: index)
            while true {
                try client.send([Operation(kind: .get, key: .existing(keyCount - 1))])
                if case .success = try client.receive() { break }
                guard MonotonicClock.now() < deadline else {
                    throw BenchError.setup(
                        "\(target.name): \(target.socketPaths[index]) has no key k\(keyCount - 1) after \(timeout) s")
                }
                MonotonicClock.sleep(until: MonotonicClock.now() + 20_000_000)
            }
        }
    }

    private func isExistingKey(_ message: String) -> Bool {
        target.kind == .folio && message.contains(#""code":"conflict""#)
    }
}
