import FolioJSON
import Foundation
import Testing

/// Event loops that look for work before they sleep (`--idle-poll`) answer as loops that sleep at
/// once, and stop looking once nothing comes.
@Suite struct IdlePollTests {
    /// foliod's CPU time so far, in clock ticks (user and system), from /proc.
    private func cpuTicks(_ pid: pid_t) throws -> Int {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // The fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
        let fields = stat[stat.index(after: stat.lastIndex(of: ")")!)...].split(separator: " ")
        return Int(fields[11])! + Int(fields[12])!
    }

    /// After 0.2 s with nothing coming, foliod takes under a fifth of a second of CPU in the next
    /// second: every thread that looked for work has gone to sleep.
    private func expectIdle(_ daemon: RunningDaemon) throws {
        usleep(200_000)
        let pid = try #require(daemon.pid)
        let before = try cpuTicks(pid)
        usleep(1_000_000)
        let after = try cpuTicks(pid)
        let ticks = Int(sysconf(Int32(_SC_CLK_TCK)))
        #expect(after - before < ticks / 5, "an idle foliod used \(after - before) ticks of \(ticks) in a second")
    }

    @Test(arguments: ["0", "1000"])
    func readsOneAtATimeBesideWritesAreAnsweredAndAnIdleDaemonSleeps(poll: String) throws {
        try withRunningDaemon(arguments: ["--idle-poll", poll]) { daemon in
            let reader = try daemon.connect(timeout: 60)
            let writer = try daemon.connect(timeout: 10)
            #expect(try writer.request(["op": "create", "collection": "Doc", "id": "d", "data": ["n": 0]]).isOK)
            var version: Int64 = 1
            for round in 1...300 {
                // A read one at a time (what the loops poll for), and now and then a write.
                let got = try reader.request(["op": "get", "collection": "Doc", "id": "d"])
                #expect(got.result?["version"]?.integerValue == version)
                #expect(got.result?["n"]?.integerValue == version - 1)
                if round % 10 == 0 {
                    let updated = try writer.request([
                        "op": "update", "collection": "Doc", "id": "d", "ifVersion": .int(version),
                        "patch": ["n": .int(version)],
                    ])
                    #expect(updated.isOK)
                    version += 1
                }
            }
            // Nothing comes now: whatever the loops learnt, they sleep within a few waits.
            try expectIdle(daemon)
        }
    }

    /// The writer's thread looks for the next write before it sleeps (for up to four times
    /// `--idle-poll`): writes one at a time are answered as with `--idle-poll 0`, which never
    /// polls (its count of writes found polling stays 0), and an idle daemon sleeps.
    @Test(arguments: ["0", "1000"])
    func writesOneAtATimeAreAnsweredAndAnIdleWriterSleeps(poll: String) throws {
        try withRunningDaemon(arguments: ["--idle-poll", poll]) { daemon in
            let connection = try daemon.connect(timeout: 60)
            #expect(try connection.request(["op": "create", "collection": "Doc", "id": "d", "data": ["n": 0]]).isOK)
            for version in Int64(1)...200 {
                if version % 2 == 0 {
                    #expect(
                        try connection.request(["op": "create", "collection": "Other", "data": ["n": .int(version)]])
                            .isOK)
                }
                let updated = try connection.request([
                    "op": "update", "collection": "Doc", "id": "d", "ifVersion": .int(version),
                    "patch": ["n": .int(version)],
                ])
                #expect(updated.result?["version"]?.integerValue == version + 1, "\(updated)")
            }
            let got = try connection.request(["op": "get", "collection": "Doc", "id": "d"])
            #expect(got.result?["n"]?.integerValue == 200)
            let metrics = try connection.request(["op": "metrics"]).result?["text"]?.stringValue ?? ""
            #expect(metrics.contains("folio_writer_idle_poll_finds_total "), "\(metrics)")
            if poll == "0" { #expect(metrics.contains("folio_writer_idle_poll_finds_total 0\n"), "\(metrics)") }
            try expectIdle(daemon)
        }
    }
}
