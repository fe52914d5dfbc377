import Foundation
import Glibc
import Testing

/// While the journal holds records, the checkpointer starts `data.mdb`'s write-back every
/// millisecond, so that a journal sync never meets more than a millisecond's pages on their way to
/// the disk (one client's create: p99 2 ms with 20 ms between write-backs, 0.8 ms with 1 ms); while
/// the journal is empty it looks only every 20 ms, so an idle foliod does not wake a thousand times
/// a second. Counted as the checkpointer thread's voluntary context switches, one per sleep.
@Suite struct WritebackPacingTests {
    /// Voluntary context switches of foliod's `folio-checkpoint` thread so far. The thread names
    /// itself once it runs, which on a loaded machine may be after foliod answers its first
    /// request: it is looked for up to 10 s.
    private func checkpointerSwitches(_ pid: Int32) throws -> Int {
        let deadline = Date().addingTimeInterval(10)
        while true {
            if let count = try checkpointerSwitchesNow(pid) { return count }
            guard Date() < deadline else { throw DaemonError("foliod \(pid) has no folio-checkpoint thread") }
            usleep(10_000)
        }
    }

    private func checkpointerSwitchesNow(_ pid: Int32) throws -> Int? {
        let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")
        for task in tasks {
            let name = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8)) ?? ""
            guard name.hasPrefix("folio-checkpoin") else { continue }
            let status = try String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)
            for line in status.split(separator: "\n") where line.hasPrefix("voluntary_ctxt_switches:") {
                if let count = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).last.flatMap({ Int($0) }) {
                    return count
                }
            }
            throw DaemonError("no voluntary_ctxt_switches for task \(task) of foliod \(pid)")
        }
        return nil
    }

    @Test func theWritebackKeepsPaceWithWritesAndRestsWhenTheyStop() throws {
        try withRunningDaemon { daemon in
            let pid = try #require(daemon.pid)
            let client = try daemon.connect(timeout: 10)

            // Durable creates one after another for a second: the journal holds records throughout.
            var before = try checkpointerSwitches(pid)
            var start = Date()
            var creates = 0
            while Date().timeIntervalSince(start) < 1 {
                let created = try client.request([
                    "op": "create", "collection": "Note", "data": ["n": .int(Int64(creates))],
                ])
                try #require(created.isOK, "create \(creates): \(created)")
                creates += 1
            }
            let busySeconds = Date().timeIntervalSince(start)
            let busy = Double(try checkpointerSwitches(pid) - before) / busySeconds

            // Then nothing: once a checkpoint has emptied the journal, a second of rest.
            var live = Int64.max
            for _ in 0..<100 where live != 0 {
                usleep(50_000)
                live = try client.request(["op": "stats"]).result?["journal"]?["liveBytes"]?.integerValue ?? -1
            }
            try #require(live == 0, "the journal still holds \(live) bytes 5 s after the last write")
            before = try checkpointerSwitches(pid)
            start = Date()
            usleep(1_000_000)
            let idle = Double(try checkpointerSwitches(pid) - before) / Date().timeIntervalSince(start)

            // A look every millisecond is up to 1,000 a second (fewer when the machine is busy);
            // one every 20 ms is 50, plus a few for each checkpoint's flushes.
            #expect(busy >= 150, "\(busy) looks a second while \(creates) creates came in \(busySeconds) s")
            #expect(idle <= 100, "\(idle) looks a second with the journal empty")
        }
    }
}
