import FolioHarness
import FolioJSON
import Foundation
import Testing

/// The randomized check of issue 10: creates, updates, deletes and batches with references under
/// every delete rule, each step compared with `RelationModel` over the socket of a real foliod,
/// then the store verified and rebuilt offline to the same digest.
///
/// `FOLIO_MODEL_STEPS` sets the number of steps (400 by default), `FOLIO_MODEL_SEED` the seed (a
/// new one each run by default; a failure names it). `make relations` runs long ones.
@Suite struct RelationModelTests {
    private static let environment = ProcessInfo.processInfo.environment
    private static let steps = Int(environment["FOLIO_MODEL_STEPS"] ?? "") ?? 400
    private static let seed = UInt64(environment["FOLIO_MODEL_SEED"] ?? "") ?? UInt64.random(in: 1...999_999)

    @Test func randomWritesWithReferencesAgreeWithTheModel() throws {
        let seed = Self.seed
        try withRunningDaemon(arguments: ["--durability", "none"]) { daemon in
            let run = try RelationRun(seed: seed, daemon: daemon)
            let started = Date()
            do {
                try run.run(steps: Self.steps)
            } catch let disagreement as RelationRun.Disagreement {
                Issue.record("\(disagreement)")
                return
            } catch {
                Issue.record("seed \(seed) (FOLIO_MODEL_SEED=\(seed)), step \(run.step): \(error)")
                throw error
            }
            let tally = run.tally.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            print(
                "relations model: seed \(seed), \(Self.steps) steps in \(String(format: "%.1f", -started.timeIntervalSinceNow)) s: \(tally)"
            )

            let verify = try daemon.request(["op": "verify"])
            #expect(verify.result?["ok"] == true && verify.result?["mismatches"] == [], "seed \(seed): \(verify)")
            let digest = try #require(try daemon.request(["op": "stats"]).result?["digest"]?.stringValue)
            #expect(try daemon.stop() == 0)

            let copy = daemon.directory + "/copy"
            try FileManager.default.copyItem(atPath: daemon.dataDirectory, toPath: copy)
            let rebuild = try CommandRun.run(Binaries.foliod, ["rebuild", "--data", copy], timeout: 300)
            #expect(rebuild.status == 0, "seed \(seed): \(rebuild)")
            #expect(
                rebuild.stdout.contains("digest     \(digest)"),
                "seed \(seed): the rebuilt store has another digest than \(digest): \(rebuild)")
            let offline = try CommandRun.run(Binaries.foliod, ["verify", "--data", copy], timeout: 300)
            #expect(offline.status == 0 && offline.stdout.contains("digest     \(digest)"), "seed \(seed): \(offline)")
        }
    }
}
