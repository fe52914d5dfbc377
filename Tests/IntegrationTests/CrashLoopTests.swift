import FolioHarness
import Testing

@Suite struct CrashLoopTests {
    /// The crash loop's checks can fail: with acknowledged writes taken away behind foliod's back
    /// (`--lose-writes` puts back the data.mdb of before the second cycle's workload), the second
    /// cycle must report them and the run exit 1. Seed 10 kills both cycles in their workload,
    /// 286 and 278 ms in, so that the second has acknowledged writes to lose.
    @Test func lostAcknowledgedWritesAreReported() throws {
        try Binaries.require()
        try withTemporaryDirectory { directory in
            let run = try CommandRun.run(
                Binaries.folioChaos,
                [
                    "--cycles", "2", "--seed", "10", "--workload-ms", "300", "--lose-writes", "--foliod", Binaries.foliod,
                    "--directory", directory,
                ],
                timeout: 300)
            #expect(run.status == 1, "\(run)")
            #expect(run.stdout.contains("VIOLATION in cycle 2"), "\(run.stdout)")
            #expect(run.stdout.contains("acknowledged write"), "\(run.stdout)")
            #expect(run.stdout.hasSuffix("chaos: 1 passed, 1 failed\n"), "\(run.stdout)")
        }
    }
}
