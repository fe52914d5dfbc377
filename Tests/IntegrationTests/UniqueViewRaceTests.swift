import FolioHarness
import FolioJSON
import Foundation
import Testing

@Suite struct UniqueViewRaceTests {
    @Test func clientsRacingToInsertTheSameKeyLeaveExactlyOneWinner() throws {
        try withRunningDaemon { daemon in
            let defined = try daemon.request([
                "op": "view.define", "name": "byStuId", "collection": "Student", "sort": ["stuId"], "unique": true,
            ])
            #expect(defined.isOK)
            let socket = daemon.socketPath
            let outcomes = Locked<[Int: [String]]>([:])
            let errors = runOnThreads(24) { client in
                let connection = try TestConnection(path: socket)
                // Every client tries every key; each round starts at a different key.
                for round in 0..<10 {
                    let stuId = (round + client) % 10
                    let response = try connection.request([
                        "op": "create", "collection": "Student",
                        "data": ["stuId": .int(Int64(stuId)), "name": .string("c\(client)")],
                    ])
                    let outcome = response.isOK ? "ok" : (response.errorCode ?? "?")
                    outcomes.withLock { $0[stuId, default: []].append(outcome) }
                    if response.errorCode == "conflict" {
                        guard response["error"]?["view"] == "byStuId",
                            response["error"]?["existingId"]?.stringValue != nil
                        else {
                            throw DaemonError("conflict without details: \(response)")
                        }
                    }
                }
            }
            #expect(errors.isEmpty, "\(errors)")
            for (stuId, results) in outcomes.current {
                #expect(results.filter { $0 == "ok" }.count == 1, "stuId \(stuId): \(results)")
                #expect(results.filter { $0 == "conflict" }.count == 23, "stuId \(stuId): \(results)")
            }
            #expect(try daemon.request(["op": "count", "view": "byStuId"]).result?["count"] == 10)
            #expect(try daemon.request(["op": "count", "collection": "Student"]).result?["count"] == 10)
            let stats = try daemon.request(["op": "stats"])
            #expect(
                stats.result?["lastSeq"] == 11, "the view definition and ten creates: refused creates left no event")
        }
    }
}
