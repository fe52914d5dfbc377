import FolioHarness

/// `cycles` short-lived connections (`ConnectionChurn`, every shape in turn) from a few threads, as
/// fast as foliod takes them. Afterwards foliod must hold what it held before: the same descriptors
/// and connections, no client memory, a heap that stopped growing after the first half; and every
/// unanswered write applied.
struct ConnectionChurnStorm {
    static let name = "connect/disconnect"
    static let threads = 4
    /// Heap foliod may gain over the second half of the churn (the allocator settled in the first):
    /// 8 MiB over 50,000 connections is 168 bytes each, less than a connection's own objects. The
    /// heap grows in steps as arenas fill (+1.4 MiB and +5.5 MiB in two runs on the same build), so
    /// a smaller leak shows only over repeated runs (`--only churn,churn,churn,churn`).
    static let anonymousSlackKiB = 8 << 10

    let cycles: Int

    func run(_ bench: LoadContext) throws -> [StormFigure] {
        let storm = "\(cycles.grouped) × \(Self.name)"
        // Two halves: a leak grows memory in both, the allocator settling in only in the first.
        let before = try bench.quietSample()
        let first = try churn(bench, serials: 0..<(cycles / 2))
        let middle = try bench.quietSample()
        let second = try churn(bench, serials: (cycles / 2)..<cycles)
        let seconds = first.seconds + second.seconds
        let writes = (0..<cycles).count(where: { ConnectionChurn.shape($0) == .unansweredWrite })
        let (after, settled) = try bench.waitUntil(timeout: 30) {
            $0.connections <= before.connections && $0.descriptors <= before.descriptors
                && $0.lastSeq >= before.lastSeq + writes
        }
        let failed = (count: first.failed + second.failed, first: first.firstFailure ?? second.firstFailure)

        var figures: [StormFigure] = []
        figures.append(
            StormFigure(
                storm, "connections",
                during: "\(Int(Double(cycles) / seconds).grouped)/s for \(Report.seconds(seconds))",
                check:
                    "\(Self.threads) threads, shapes: \(ConnectionChurn.Shape.allCases.map { "\($0)" }.joined(separator: ", "))"
            ))
        figures.append(
            StormFigure(
                storm, "failed", during: "\(failed.count)",
                check: "none" + (failed.first.map { " (first: \($0))" } ?? ""),
                holds: failed.count == 0))
        figures.append(
            StormFigure(
                storm, "descriptors (/proc/PID/fd)", before: "\(before.descriptors)", after: "\(after.descriptors)",
                check: "after = before", holds: after.descriptors == before.descriptors))
        figures.append(
            StormFigure(
                storm, "connections (stats)", before: "\(before.connections)", after: "\(after.connections)",
                check: "after = before", holds: after.connections == before.connections && settled))
        figures.append(
            StormFigure(
                storm, "clientMemory (stats)", before: StormFigure.bytes(before.clientMemory),
                after: StormFigure.bytes(after.clientMemory),
                check: "after ≤ before + 4 KiB (the control connection's own)",
                holds: after.clientMemory <= before.clientMemory + 4096))
        figures.append(
            StormFigure(
                storm, "foliod VmRSS", before: StormFigure.kibibytes(before.memory.residentKiB),
                after: StormFigure.kibibytes(after.memory.residentKiB),
                check: "after − before = \(StormFigure.kibibytes(after.memory.residentKiB - before.memory.residentKiB))"
            ))
        let grown = after.memory.anonymousKiB - middle.memory.anonymousKiB
        figures.append(
            StormFigure(
                storm, "foliod RssAnon (during: half-way)", before: StormFigure.kibibytes(before.memory.anonymousKiB),
                during: StormFigure.kibibytes(middle.memory.anonymousKiB),
                after: StormFigure.kibibytes(after.memory.anonymousKiB),
                check:
                    "second half: +\(StormFigure.kibibytes(grown)) ≤ \(StormFigure.kibibytes(Self.anonymousSlackKiB))",
                holds: grown <= Self.anonymousSlackKiB))
        let applied = after.lastSeq - before.lastSeq
        figures.append(
            StormFigure(
                storm, "unanswered writes applied", during: "\(writes.grouped) sent",
                after: "\(applied.grouped) events",
                check: "all applied", holds: applied == writes))
        return figures
    }

    /// Runs the connections numbered `serials` over `threads` threads.
    private func churn(_ bench: LoadContext, serials: Range<Int>) throws -> (
        seconds: Double, failed: Int, firstFailure: String?
    ) {
        let failures = Locked<(count: Int, first: String?)>((0, nil))
        let began = MonotonicClock.now()
        let socket = bench.socket
        let workers = (0..<Self.threads).map { thread in
            ClientThread(name: "bench-churn-\(thread)") {
                var failed = 0
                var first: String?
                for serial in stride(from: serials.lowerBound + thread, to: serials.upperBound, by: Self.threads) {
                    do {
                        try ConnectionChurn.cycle(ConnectionChurn.shape(serial), socket: socket)
                    } catch {
                        failed += 1
                        first = first ?? "\(ConnectionChurn.shape(serial)): \(error)"
                    }
                }
                failures.withLock { $0 = ($0.count + failed, $0.first ?? first) }
            }
        }
        for worker in workers { worker.join() }
        let failed = failures.withLock { $0 }
        return (LoadContext.seconds(began, MonotonicClock.now()), failed.count, failed.first)
    }
}
