import FolioHarness
import FolioJSON
import Testing

/// Many clients at once, each on its own connection and thread.
@Suite struct ConcurrentClientsTests {
    @Test func twoHundredClientsCreateAndReadTheirObjects() throws {
        try withRunningDaemon { daemon in
            let clients = 200
            let perClient = 3
            let socket = daemon.socketPath
            let startingLine = StartingLine(clients)
            let problems = Locked<[String]>([])
            let errors = runOnThreads(clients) { client in
                let connection = try TestConnection(path: socket)
                startingLine.arriveAndWait()
                for item in 0..<perClient {
                    let id = "c\(client)-\(item)"
                    let created = try connection.request([
                        "op": "create", "collection": "Note", "id": .string(id), "tag": .string(id),
                        "data": ["client": .int(Int64(client)), "item": .int(Int64(item))],
                    ])
                    if created["tag"] != .string(id) || created.result?["id"] != .string(id) || created.version != 1 {
                        problems.withLock { $0.append("create \(id): \(created)") }
                    }
                }
                for item in 0..<perClient {
                    let id = "c\(client)-\(item)"
                    let fetched = try connection.request(["op": "get", "collection": "Note", "id": .string(id)])
                    if fetched.result?["client"] != .int(Int64(client)) || fetched.result?["item"] != .int(Int64(item))
                    {
                        problems.withLock { $0.append("get \(id): \(fetched)") }
                    }
                }
            }
            #expect(errors.isEmpty, "\(errors.prefix(5).map { "client \($0.index): \($0.error)" })")
            #expect(problems.current.isEmpty, "\(problems.current.prefix(5))")

            let count = try daemon.request(["op": "count", "collection": "Note"])
            #expect(count.result?["count"] == .int(Int64(clients * perClient)), "\(count)")
            let stats = try daemon.request(["op": "stats"])
            #expect(stats.result?["lastSeq"] == .int(Int64(clients * perClient)), "\(stats)")
        }
    }
}
