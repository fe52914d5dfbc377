import FolioJSON
import Foundation
import Testing

/// With durability that syncs, foliod keeps zeros past the pages of data.mdb so that commits
/// overwrite the file instead of growing it; with `none` it does not.
@Suite struct FileReserveIntegrationTests {
    private static let minimumReserve = 8 << 20

    private static func lmdb(_ connection: TestConnection) throws -> (used: Int, file: Int) {
        let stats = try #require(try connection.request(["op": "stats"]).result?["lmdb"])
        return (
            try #require(stats["usedSize"]?.integerValue.map(Int.init)),
            try #require(stats["fileSize"]?.integerValue.map(Int.init))
        )
    }

    /// Polls `stats` until the file runs at least `bytes` past the pages in use, or 20 s pass.
    private static func waitForReserve(of bytes: Int, _ connection: TestConnection) throws -> (used: Int, file: Int) {
        let deadline = Date().addingTimeInterval(20)
        var sizes = try lmdb(connection)
        while sizes.file - sizes.used < bytes && Date() < deadline {
            usleep(20_000)
            sizes = try lmdb(connection)
        }
        return sizes
    }

    /// Commits that sync data.mdb: full durability without the journal.
    @Test func commitsFillTheReserveItIsToppedUpAndWhatTheyHoldSurvivesAKill() throws {
        try withRunningDaemon(arguments: ["--journal", "off"]) { daemon in
            let connection = try daemon.connect()
            let start = try Self.waitForReserve(of: Self.minimumReserve, connection)
            #expect(start.file - start.used >= Self.minimumReserve, "no reserve at start: \(start)")

            // About 12 MiB of objects: more than the first reserve holds.
            let payload = String(repeating: "z", count: 2000)
            let count = 6000
            for index in 0..<count {
                try connection.send([
                    "op": "create", "collection": "Blob", "id": .string("b\(index)"), "data": ["p": .string(payload)],
                ])
            }
            for _ in 0..<count {
                let response = try connection.readResponse()
                #expect(response.isOK, "\(response)")
            }
            // The reserve is topped up to its target when a commit finds it below half of it.
            let grown = try Self.waitForReserve(of: Self.minimumReserve / 2, connection)
            #expect(grown.used > start.file, "the pages outgrew the first reserve: \(start) -> \(grown)")
            #expect(grown.file - grown.used >= Self.minimumReserve / 2, "the reserve was topped up: \(grown)")
            connection.close()

            daemon.killHard()
            try daemon.start()
            let reopened = try daemon.connect()
            #expect(try reopened.request(["op": "stats"]).result?["collections"]?["Blob"] == .int(Int64(count)))
            for index in stride(from: 0, to: count, by: 997) {
                let fetched = try reopened.request(["op": "get", "collection": "Blob", "id": .string("b\(index)")])
                #expect(fetched.result?["p"] == .string(payload), "b\(index): \(fetched.errorCode ?? "wrong data")")
            }
            let verified = try reopened.request(["op": "verify"])
            #expect(verified.result?["ok"] == true, "\(verified)")
        }
    }

    /// Neither commits that never sync nor journaled ones (full durability's default, whose commits
    /// sync the journal, and data.mdb only at checkpoints) keep a reserve.
    @Test(arguments: [["--durability", "none"], []])
    func withoutSyncsThereIsNoReserve(arguments: [String]) throws {
        try withRunningDaemon(arguments: arguments) { daemon in
            let connection = try daemon.connect()
            for index in 0..<200 {
                _ = try connection.request([
                    "op": "create", "collection": "Doc", "id": .string("d\(index)"), "data": ["n": .int(Int64(index))],
                ])
            }
            usleep(200_000)
            let sizes = try Self.lmdb(connection)
            #expect(sizes.file - sizes.used < 1 << 20, "\(sizes)")
        }
    }
}
