import FolioJSON
import Foundation
import Testing

/// The two ways a write's record reaches the journal (`SyncConfirmer`): the writer writes it and
/// flushes it itself when no other write waits for it and the journal's thread has nothing in
/// hand (one client), or it hands it to that thread, which flushes it while the writer goes on
/// (concurrent clients). Both count in `folio_syncs_total`, and mixed they lose nothing on kill -9.
@Suite struct JournalPathTests {
    /// `folio_syncs_total` by thread.
    private func syncs(_ connection: TestConnection) throws -> (writer: Int, confirmer: Int) {
        let text = try #require(try connection.request(["op": "metrics"]).result?["text"]?.stringValue)
        func value(_ thread: String) -> Int {
            let prefix = "folio_syncs_total{thread=\"\(thread)\"} "
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return -1 }
            return Int(Double(line.dropFirst(prefix.count)) ?? -1)
        }
        return (value("writer"), value("confirmer"))
    }

    @Test func oneClientIsFlushedByTheWriterConcurrentClientsByTheJournalsThreadAndNothingIsLost() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let before = try syncs(connection)
            #expect(before.writer >= 0 && before.confirmer >= 0, "folio_syncs_total by thread is in the metrics")
            for index in 0..<50 {
                #expect(try connection.request(["op": "create", "collection": "Note", "id": .string("one\(index)"), "data": [:]]).isOK)
            }
            // One write at a time: each waits for no other write and finds the journal's thread idle.
            let alone = try syncs(connection)
            #expect(alone.writer - before.writer == 50 && alone.confirmer == before.confirmer, "\(before) → \(alone)")

            // Clients writing at once: a write that arrives while the writer executes another sends
            // that one's record to the journal's thread. Rounds until that has happened.
            let socket = daemon.socketPath
            let acknowledged = Locked<Set<String>>([])
            var rounds = 0
            var mixed = alone
            while mixed.confirmer == alone.confirmer && rounds < 20 {
                let round = rounds
                let errors = runOnThreads(16) { client in
                    let writer = try TestConnection(path: socket)
                    for index in 0..<50 {
                        let id = "r\(round)-c\(client)-\(index)"
                        let answer = try writer.request(["op": "create", "collection": "Note", "id": .string(id), "data": ["n": .int(Int64(index))]])
                        guard answer.isOK else { throw DaemonError("\(id): \(answer)") }
                        acknowledged.withLock { _ = $0.insert(id) }
                    }
                }
                #expect(errors.isEmpty, "\(errors)")
                rounds += 1
                mixed = try syncs(connection)
            }
            #expect(mixed.confirmer > alone.confirmer, "after \(rounds) rounds of 16 clients: \(mixed)")
            // Group commit: fewer flushes than writes.
            let writes = 50 + acknowledged.current.count
            #expect((mixed.writer - before.writer) + (mixed.confirmer - before.confirmer) <= writes)

            daemon.killHard()
            try daemon.start()
            let after = try daemon.connect()
            var missing: [String] = []
            for id in (0..<50).map({ "one\($0)" }) + acknowledged.current.sorted() {
                if try after.request(["op": "get", "collection": "Note", "id": .string(id)]).version != 1 { missing.append(id) }
            }
            #expect(missing.isEmpty, "\(missing.count) acknowledged writes missing after kill -9, e.g. \(missing.prefix(5))\n\(daemon.log)")
            #expect(try after.request(["op": "count", "collection": "Note"]).result?["count"]?.integerValue == Int64(writes))
            #expect(try after.request(["op": "verify"]).result?["ok"] == .bool(true))
        }
    }
}
