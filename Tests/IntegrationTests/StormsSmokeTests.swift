import FolioHarness
import Foundation
import Testing

/// `make storms` in miniature, on every CI run: the storms harness (`folio-bench storms`) against
/// a debug foliod with small counts, so that the harness keeps working and the bounds that do not
/// depend on timing hold: idle connections all served and all released, memory bounded and given
/// back after slowloris and over-long lines, no descriptor, connection or heap left by churn.
/// Latency and throughput bounds are shown, not judged (`--timing report`): on a 2-core CI machine
/// running a debug build they say little. Two watchers that never read (one live, one in its
/// catch-up from seq 0) must be cut off with `lagging`; writes abandoned by their clients must keep
/// foliod's heap within `--client-memory` and some slack.
@Suite struct StormsSmokeTests {
    @Test(
        .disabled(
            if: underSanitizer, "a sanitizer's allocator keeps freed memory in quarantine: RSS says nothing of foliod's"
        ))
    func smallStormsHoldTheirBounds() throws {
        guard FileManager.default.isExecutableFile(atPath: Binaries.folioBench) else {
            Issue.record("no folio-bench next to foliod (\(Binaries.folioBench)); build every product")
            return
        }
        try withRunningDaemon(arguments: ["--partial-line-timeout", "2", "--watch-buffer", "262144"]) { daemon in
            let pid = try #require(daemon.pid)
            let run = try CommandRun.run(
                Binaries.folioBench,
                [
                    "storms", "--folio-socket", daemon.socketPath, "--folio-pid", "\(pid)", "--only",
                    "idle,slow,watcher,churn,abandon",
                    "--idle", "300", "--idle-rounds", "1", "--slowloris", "30", "--long-lines", "6", "--churn", "4000",
                    "--phase-seconds", "1", "--storm-seconds", "5", "--byte-interval", "0.5", "--line-timeout", "2",
                    "--abandon", "4", "--keys", "500", "--timing", "report",
                ], timeout: 300)
            #expect(run.status == 0, "\(run)")
            #expect(run.stdout.contains("300 idle connections") && run.stdout.contains("4,000 × connect/disconnect"))
            #expect(run.stdout.contains("stuck watcher") && run.stdout.contains("long writes, then gone"))
        }
    }
}
