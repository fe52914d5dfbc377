import FolioCommandLine
import Foundation

/// `folio-bench soak`: measures the most the soak's load gets from foliod, then runs it at a
/// fraction of that for a long time, with a watcher following every event and a client connecting
/// and leaving all along, sampling foliod after each window. What it holds must be flat by the end.
struct SoakCommand {
    static let usage = """
        usage: folio-bench soak --folio-socket PATH --folio-pid PID [--minutes M] [--fraction F]
                                [--window-seconds S] [--probe-seconds S] [--samples FILE] [--keys N]
                                [--timing judge|report]

        First measures the soak load's maximum: 64 closed-loop clients, 90% get / 10% durable update
        of keys k0..kN-1 (default 10000), for --probe-seconds (default 20). Then runs the same load
        open-loop at --fraction (default 0.5) of that rate for --minutes (default 30), with one
        watcher reading every event and 10 short-lived connections a second, and after every window
        of --window-seconds (default 10) samples foliod: VmRSS, RssAnon, /proc/PID/fd entries and
        `stats` (clientMemory, lmdb.usedSize, lmdb.fileSize, lmdb.readerSlotsUsed). --samples FILE
        gets one tab-separated line per window (bench/soak_plot.py draws them); bench/soak.sh
        (`make soak`) starts foliod and does both.

        The last third of the run is compared with the middle third: anonymous memory, descriptors
        and reader slots must not grow, and the map must grow by about as many bytes per event.
        Every window must also reach 0.8 of the target rate; with --timing report that is shown but
        does not fail the run (the load generator shares the machine with foliod).
        Exit status: 0 when flat and nothing failed, 1 otherwise, 64 on a usage error.
        """

    static let columns = [
        "seconds", "ops_per_s", "p50_us", "p99_us", "failed", "rss_kib", "anon_kib", "descriptors", "connections",
        "client_memory", "used_size", "file_size", "reader_slots", "last_seq", "stats_ms", "watcher_events",
        "churn_cycles",
    ]

    /// The soak's load: as `StuckWatcherStorm.writers`, updates keep the number of objects the same
    /// however long it runs. 64 connections, so that at half the maximum each is idle half the time:
    /// a connection sends one request at a time, and at 16 a durable update's wait would already
    /// hold up the requests scheduled behind it on the same connection.
    static let load = Scenario(
        id: "soak", title: "90% get / 10% durable update", clients: 64, depth: 1, readPercent: 90, writeKind: .update)
    static let churnPerSecond = 10.0

    let socket: String
    let pid: Int32
    var minutes = 30.0
    var fraction = 0.5
    var windowSeconds = 10.0
    var probeSeconds = 20.0
    var keyCount = 10_000
    var samplesPath: String?
    var judgingTiming = true

    init(_ argv: [String]) throws(UsageError) {
        var arguments = try Arguments(
            argv,
            valued: [
                "--folio-socket", "--folio-pid", "--minutes", "--fraction", "--window-seconds", "--probe-seconds",
                "--samples", "--keys", "--timing",
            ])
        guard let socket = arguments.value("--folio-socket") else { throw UsageError("give --folio-socket") }
        guard let pid = try arguments.integer("--folio-pid"), pid > 0, pid <= Int(Int32.max) else {
            throw UsageError("give --folio-pid: foliod's memory and descriptors are read from /proc")
        }
        self.socket = socket
        self.pid = Int32(pid)
        minutes = try Self.number(arguments.value("--minutes"), "--minutes") ?? minutes
        fraction = try Self.number(arguments.value("--fraction"), "--fraction") ?? fraction
        windowSeconds = try Self.number(arguments.value("--window-seconds"), "--window-seconds") ?? windowSeconds
        probeSeconds = try Self.number(arguments.value("--probe-seconds"), "--probe-seconds") ?? probeSeconds
        keyCount = max(1, try arguments.integer("--keys") ?? keyCount)
        samplesPath = arguments.value("--samples")
        switch arguments.value("--timing") {
        case nil, "judge": judgingTiming = true
        case "report": judgingTiming = false
        case let other?: throw UsageError("--timing is judge or report, not '\(other)'")
        }
        try arguments.rejectUnused()
        if let extra = arguments.positionals.first { throw UsageError("unexpected argument '\(extra)'") }
    }

    private static func number(_ text: String?, _ name: String) throws(UsageError) -> Double? {
        guard let text else { return nil }
        guard let value = Double(text), value > 0, value.isFinite else {
            throw UsageError("\(name) needs a positive number, not '\(text)'")
        }
        return value
    }

    /// One window of the soak: the load's figures and foliod's state at its end.
    private struct Window {
        let seconds: Double
        let result: RunResult
        let sample: DaemonSample
        let watcherEvents: Int
        let churnCycles: Int

        var line: String {
            let memory = sample.memory
            return [
                String(format: "%.1f", seconds), String(format: "%.0f", result.operationsPerSecond),
                "\((result.tally.allLatencies.percentile(0.5) ?? 0) / 1000)", "\((result.p99() ?? 0) / 1000)",
                "\(result.tally.failures)", "\(memory.residentKiB)", "\(memory.anonymousKiB)", "\(sample.descriptors)",
                "\(sample.connections)", "\(sample.clientMemory)", "\(sample.usedSize)", "\(sample.fileSize)",
                "\(sample.readerSlotsUsed)", "\(sample.lastSeq)",
                String(format: "%.1f", Double(sample.statsNanoseconds) / 1e6),
                "\(watcherEvents)", "\(churnCycles)",
            ].joined(separator: "\t")
        }
    }

    func run() throws -> Int32 {
        let target = Target(kind: .folio, socketPath: socket, pid: pid)
        _ = try target.connectWhenReady(timeout: 10)
        _ = try KeyPreloader(target: target, keyCount: keyCount).preload()
        let bench = try LoadContext(socket: socket, pid: pid, keyCount: keyCount, phaseSeconds: windowSeconds)

        let probe = try bench.load(Self.load, seconds: probeSeconds, warmup: 2)
        guard probe.tally.failures == 0 else {
            throw BenchError.setup("the probe failed: \(probe.tally.firstFailure ?? "?")")
        }
        var paced = Self.load
        paced.requestsPerSecond = probe.operationsPerSecond * fraction
        progress(
            "maximum \(Report.rate(probe)) ops/s (p99 \(Report.duration(probe.p99()))); soaking at "
                + "\(Int(paced.requestsPerSecond!).grouped) ops/s for \(minutes) min")

        var file: FileHandle?
        if let samplesPath {
            guard FileManager.default.createFile(atPath: samplesPath, contents: nil),
                let handle = FileHandle(forWritingAtPath: samplesPath)
            else { throw BenchError.setup("cannot write \(samplesPath)") }
            let header =
                "# maximum \(Int(probe.operationsPerSecond)) ops/s, target \(Int(paced.requestsPerSecond!)) ops/s, "
                + "load: \(Self.load.title), \(Self.load.clients) clients, 1 watcher, \(Int(Self.churnPerSecond)) connections/s\n"
            handle.write(Data((header + Self.columns.joined(separator: "\t") + "\n").utf8))
            file = handle
        }
        defer { try? file?.close() }

        let first = try bench.quietSample()
        let watcher = try FollowingWatcher(socket: socket, after: first.lastSeq)
        let churn = ChurningClient(socket: socket, perSecond: Self.churnPerSecond)
        let began = MonotonicClock.now()
        let end = began + MonotonicClock.nanoseconds(seconds: minutes * 60)
        var windows: [Window] = []
        var nextProgress = began
        while MonotonicClock.now() < end {
            let result = try bench.load(paced, warmup: 0)
            // foliod sees the window's clients close a moment after they do: sample once it has (the
            // watcher, a short-lived connection and the sampler's own stay), waiting at most 2 s.
            let settled = MonotonicClock.now() + 2_000_000_000
            while (ProcFile.names(in: "/proc/\(pid)/fd")?.count ?? 0) > first.descriptors + 2
                && MonotonicClock.now() < settled
            {
                MonotonicClock.sleep(until: MonotonicClock.now() + 20_000_000)
            }
            let window = Window(
                seconds: LoadContext.seconds(began, MonotonicClock.now()), result: result, sample: try bench.sample(),
                watcherEvents: watcher.current.events, churnCycles: churn.current.cycles)
            windows.append(window)
            file?.write(Data((window.line + "\n").utf8))
            if MonotonicClock.now() >= nextProgress {
                nextProgress += 60_000_000_000
                progress(
                    String(format: "%.0f s: ", window.seconds)
                        + "\(Report.rate(result)) ops/s, p99 \(Report.duration(result.p99())), "
                        + "RSS \(StormFigure.kibibytes(window.sample.memory.residentKiB)) (anon \(StormFigure.kibibytes(window.sample.memory.anonymousKiB))), "
                        + "\(window.sample.descriptors) fds, map \(StormFigure.bytes(window.sample.usedSize)), "
                        + "\(window.sample.readerSlotsUsed) reader slots, stats \(Report.duration(window.sample.statsNanoseconds))"
                )
            }
        }
        let followed = watcher.stop()
        let churned = churn.stop()
        let last = try bench.quietSample()

        let (table, flat) = Self.judge(
            windows, target: paced.requestsPerSecond!, first: first, last: last, watcher: followed, churn: churned,
            judgingTiming: judgingTiming)
        print(
            "maximum \(Report.rate(probe)) ops/s (\(Self.load.title), \(Self.load.clients) clients, p99 "
                + "\(Report.duration(probe.p99()))); soak at \(Int(paced.requestsPerSecond!).grouped) ops/s for "
                + "\(windows.count) windows of \(windowSeconds) s")
        print(table.plain)
        return flat ? 0 : 1
    }

    /// Compares the last third of the windows with the middle third.
    private static func judge(
        _ windows: [Window], target: Double, first: DaemonSample, last: DaemonSample, watcher: FollowingWatcher.Counts,
        churn: ChurningClient.Counts, judgingTiming: Bool
    ) -> (TextTable, Bool) {
        var table = TextTable(header: ["measure", "start", "middle third (max)", "last third (max)", "bound", "result"])
        var flat = true
        func row(
            _ measure: String, _ start: String, _ middle: String, _ end: String, _ bound: String, _ holds: Bool?,
            isTiming: Bool = false
        ) {
            let judged = judgingTiming || !isTiming
            if holds == false && judged { flat = false }
            let verdict = holds.map { $0 ? "ok" : judged ? "FAILED" : "over (timing, not judged)" } ?? ""
            table.append([measure, start, middle, end, bound, verdict])
        }
        let third = max(1, windows.count / 3)
        let middle = Array(windows.dropFirst(third).prefix(third))
        let end = Array(windows.suffix(third))
        func most(_ part: [Window], _ value: (Window) -> Int) -> Int { part.map(value).max() ?? 0 }

        let anonMiddle = most(middle) { $0.sample.memory.anonymousKiB }
        let anonEnd = most(end) { $0.sample.memory.anonymousKiB }
        let anonSlack = max(2048, anonMiddle / 20)
        row(
            "foliod RssAnon", StormFigure.kibibytes(first.memory.anonymousKiB), StormFigure.kibibytes(anonMiddle),
            StormFigure.kibibytes(anonEnd), "last ≤ middle + \(StormFigure.kibibytes(anonSlack))",
            anonEnd <= anonMiddle + anonSlack)
        row(
            "foliod VmRSS", StormFigure.kibibytes(first.memory.residentKiB),
            StormFigure.kibibytes(most(middle) { $0.sample.memory.residentKiB }),
            StormFigure.kibibytes(most(end) { $0.sample.memory.residentKiB }), "includes LMDB pages read", nil)
        let fdsMiddle = most(middle) { $0.sample.descriptors }
        let fdsEnd = most(end) { $0.sample.descriptors }
        // A sample may catch a short-lived connection, or one of a window's clients not yet closed.
        row(
            "descriptors", "\(first.descriptors)", "\(fdsMiddle)", "\(fdsEnd)",
            "last ≤ middle + 4; quiet after: \(last.descriptors) = \(first.descriptors)",
            fdsEnd <= fdsMiddle + 4 && last.descriptors == first.descriptors)
        let slotsMiddle = most(middle) { $0.sample.readerSlotsUsed }
        let slotsEnd = most(end) { $0.sample.readerSlotsUsed }
        row(
            "lmdb.readerSlotsUsed", "\(first.readerSlotsUsed)", "\(slotsMiddle)", "\(slotsEnd)", "last ≤ middle",
            slotsEnd <= slotsMiddle)
        func bytesPerEvent(_ part: [Window]) -> Double {
            guard let a = part.first?.sample, let b = part.last?.sample, b.lastSeq > a.lastSeq else { return 0 }
            return Double(b.usedSize - a.usedSize) / Double(b.lastSeq - a.lastSeq)
        }
        let growthMiddle = bytesPerEvent(middle)
        let growthEnd = bytesPerEvent(end)
        row(
            "lmdb.usedSize", StormFigure.bytes(first.usedSize), StormFigure.bytes(most(middle) { $0.sample.usedSize }),
            StormFigure.bytes(most(end) { $0.sample.usedSize }),
            String(format: "grows %.0f B/event, then %.0f B/event (≤ 1.5×)", growthMiddle, growthEnd),
            growthEnd <= max(1.5 * growthMiddle, 64))
        row(
            "lmdb.fileSize", StormFigure.bytes(first.fileSize), StormFigure.bytes(most(middle) { $0.sample.fileSize }),
            StormFigure.bytes(most(end) { $0.sample.fileSize }), "used size and the file reserve", nil)
        row(
            "clientMemory", StormFigure.bytes(first.clientMemory),
            StormFigure.bytes(most(middle) { $0.sample.clientMemory }),
            StormFigure.bytes(most(end) { $0.sample.clientMemory }), "after: \(StormFigure.bytes(last.clientMemory))",
            nil)
        let slowest = windows.map(\.result.operationsPerSecond).min() ?? 0
        row(
            "ops/s per window (min)", "target \(Int(target).grouped)",
            "\(Int(middle.map(\.result.operationsPerSecond).min() ?? 0).grouped)",
            "\(Int(end.map(\.result.operationsPerSecond).min() ?? 0).grouped)", "every window ≥ 0.8 × target",
            slowest >= 0.8 * target, isTiming: true)
        row(
            "p99 per window (max)", "", Report.duration(middle.compactMap { $0.result.p99() }.max()),
            Report.duration(end.compactMap { $0.result.p99() }.max()), "", nil)
        row(
            "stats answer (max)", "", Report.duration(middle.map(\.sample.statsNanoseconds).max()),
            Report.duration(end.map(\.sample.statsNanoseconds).max()), "a digest pass over the store", nil)
        let failures = windows.reduce(0) { $0 + $1.result.tally.failures }
        row(
            "requests failed", "", "", "\(failures)",
            windows.compactMap(\.result.tally.firstFailure).first.map { "none (first: \($0))" } ?? "none", failures == 0
        )
        row(
            "watcher", "", "", "\(watcher.events.grouped) events, \(watcher.resumed) resumed",
            "in order, no gap" + (watcher.firstGap.map { " (\($0))" } ?? "")
                + (watcher.failure.map { "; \($0)" } ?? ""),
            watcher.gaps == 0 && watcher.failure == nil && watcher.events > 0)
        row(
            "short connections", "", "", "\(churn.cycles.grouped)",
            "none failed" + (churn.firstFailure.map { " (first: \($0))" } ?? ""), churn.failures == 0)
        return (table, flat)
    }

    private func progress(_ line: String) { StandardError.write("folio-bench: soak: \(line)") }
}
