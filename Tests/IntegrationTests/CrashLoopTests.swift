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
                    "--cycles", "2", "--seed", "10", "--workload-ms", "300", "--lose-writes", "--foliod",
                    Binaries.foliod,
                    "--directory", directory,
                ],
                timeout: 300)
            #expect(run.status == 1, "\(run)")
            #expect(run.stdout.contains("VIOLATION in cycle 2"), "\(run.stdout)")
            #expect(run.stdout.contains("acknowledged write"), "\(run.stdout)")
            #expect(run.stdout.hasSuffix("chaos: 1 passed, 1 failed\n"), "\(run.stdout)")
        }
    }

    /// A foliod that applied an atomic batch in two parts must be reported: `--split-batches` sends
    /// each atomic batch without a key as two, so other clients' events fall between the halves (or a
    /// kill between them leaves half a batch, or the second half's refusal leaves the first).
    @Test func halfAppliedBatchesAreReported() throws {
        let run = try crashLoop(["--cycles", "4", "--seed", "10", "--workload-ms", "600", "--split-batches"])
        #expect(run.status == 1, "\(run)")
        #expect(
            ["not contiguous", "only in part", "which no request explains"].contains { run.stdout.contains($0) },
            "\(run.stdout)")
    }

    /// A foliod that answered a retry as a replay but wrote it again must be reported: with
    /// `--double-apply-retries` replays go out without their key and the driver takes the first
    /// answer again as theirs: the second writes show in the log (a write's nonce twice), or in the
    /// versions later answers report. (A retry that foliod refuses the second time writes nothing;
    /// over six cycles some retry of an update is applied again.)
    @Test func retriesWrittenTwiceAreReported() throws {
        let run = try crashLoop(["--cycles", "6", "--seed", "10", "--workload-ms", "600", "--double-apply-retries"])
        #expect(run.status == 1, "\(run)")
        #expect(
            ["appears twice", "which no request explains", "the model makes it"].contains { run.stdout.contains($0) },
            "\(run.stdout)")
    }

    private func crashLoop(_ arguments: [String]) throws -> CommandRun {
        try Binaries.require()
        return try withTemporaryDirectory { directory in
            try CommandRun.run(
                Binaries.folioChaos, arguments + ["--foliod", Binaries.foliod, "--directory", directory], timeout: 300)
        }
    }
}
