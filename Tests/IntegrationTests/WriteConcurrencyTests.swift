import FolioHarness
import FolioJSON
import FolioStore
import Foundation
import Testing

/// 64 clients at once send valid writes, stale and contended updates and invalid requests, pipelined.
/// Every acknowledged write is stored exactly once, every refused one changes nothing, the log has no
/// gaps, and replaying the log gives the live state byte for byte.
@Suite struct WriteConcurrencyTests {
    static let clients = 64
    static let rounds = 3
    static let shared = ["s0", "s1", "s2"]

    /// What the clients were told; the daemon's state must match it.
    struct Ledger {
        /// Acknowledged events as "id@version".
        var events: [String] = []
        /// Acknowledged creates, by id.
        var creates: [String] = []
        /// Per object still alive, its expected fields (after the last acknowledged write).
        var objects: [String: JSONObject] = [:]
        var deleted: Set<String> = []
        /// Per shared object, the versions its acknowledged updates produced, with the client.
        var sharedVersions: [String: [(version: Int64, client: Int)]] = [:]
        var problems: [String] = []
    }

    @Test func mixedConcurrentWritesAreStoredExactlyOnceAndTheLogReplaysToTheSameState() throws {
        try withRunningDaemon { daemon in
            let ledger = Locked(Ledger())
            let setup = try daemon.connect()
            for id in Self.shared {
                let created = try setup.request([
                    "op": "create", "collection": "Work", "id": .string(id), "data": ["last": -1],
                ])
                #expect(created.version == 1, "\(created)")
                ledger.withLock {
                    $0.events.append("\(id)@1")
                    $0.creates.append(id)
                    $0.objects[id] = ["last": -1]
                }
            }

            let socket = daemon.socketPath
            let startingLine = StartingLine(Self.clients)
            let errors = runOnThreads(Self.clients) { client in
                let connection = try TestConnection(path: socket)
                startingLine.arriveAndWait()
                for round in 0..<Self.rounds {
                    try Self.sendRound(client: client, round: round, connection, ledger)
                }
                for attempt in 0..<3 {
                    try Self.contend(client: client, attempt: attempt, connection, ledger)
                }
            }
            #expect(errors.isEmpty, "\(errors.prefix(5).map { "client \($0.index): \($0.error)" })")
            let expected = ledger.current
            #expect(
                expected.problems.isEmpty, "\(expected.problems.count) wrong answers: \(expected.problems.prefix(8))")

            let connection = try daemon.connect()
            try Self.checkLog(connection, against: expected)
            try Self.checkObjects(connection, against: expected)
            try Self.checkSharedObjects(connection, against: expected)

            let status = try daemon.stop()
            #expect(status == 0, "\(daemon.log)")
            try Self.checkReplay(dataDirectory: daemon.dataDirectory)
        }
    }

    /// One pipelined batch: valid create and update, a stale update, a duplicate create, invalid
    /// lines, an update of a missing object, a server-made id; in the last round a delete; last a
    /// count of the client's own objects.
    static func sendRound(client: Int, round: Int, _ connection: TestConnection, _ ledger: Locked<Ledger>) throws {
        let own = "w\(client)-\(round)"
        let last = round == rounds - 1
        enum Expect {
            case ok(version: Int64)
            case error(String)
            case count(Int)
        }
        var lines: [(line: String, expect: Expect)] = [
            (
                #"{"op":"create","collection":"Work","id":"\#(own)","data":{"client":\#(client),"round":\#(round),"n":0}}"#,
                .ok(version: 1)
            ),
            (
                #"{"op":"update","collection":"Work","id":"\#(own)","patch":{"n":1,"note":"x"},"ifVersion":1}"#,
                .ok(version: 2)
            ),
            (#"{"op":"update","collection":"Work","id":"\#(own)","patch":{"n":99},"ifVersion":1}"#, .error("conflict")),
            (#"{"op":"create","collection":"Work","id":"\#(own)","data":{"n":-5}}"#, .error("conflict")),
            (#"{"op":"create","collection":"Work","data":{"_bad":1}}"#, .error("bad_request")),
            (#"{"op":"create","collection":"Work","data":{"client":\#(client),"anonymous":true}}"#, .ok(version: 1)),
            (
                #"{"op":"update","collection":"Work","id":"missing-\#(client)-\#(round)","patch":{"n":1}}"#,
                .error("not_found")
            ),
            (#"{"op":"delete","collection":"Work","id":"\#(own)","ifVersion":1}"#, .error("conflict")),
            (#"{"op":"create","collection":"Work","data":{"n":1}"#, .error("bad_request")),
            (#"{"op":"update","collection":"Work","id":"\#(own)","patch":{"version":7}}"#, .error("bad_request")),
        ]
        if last {
            lines.append((#"{"op":"delete","collection":"Work","id":"\#(own)","ifVersion":2}"#, .ok(version: 3)))
        }
        // A filtered count runs off the event loop; it must still see this connection's writes.
        let ownLive = 2 * (round + 1) - (last ? 1 : 0)
        lines.append((#"{"op":"count","collection":"Work","where":{"client":\#(client)}}"#, .count(ownLive)))

        try connection.send(bytes: Array(lines.map(\.line).joined(separator: "\n").utf8) + [0x0A])
        for (index, entry) in lines.enumerated() {
            let response = try connection.readResponse()
            ledger.withLock { ledger in
                switch entry.expect {
                case .ok(let version):
                    guard let result = response.result, response.version == version else {
                        ledger.problems.append("client \(client) round \(round) line \(index): \(response)")
                        return
                    }
                    if index == 5 {
                        guard let id = result["id"]?.stringValue else {
                            return ledger.problems.append("no id: \(response)")
                        }
                        ledger.events.append("\(id)@1")
                        ledger.creates.append(id)
                        ledger.objects[id] = ["client": .int(Int64(client)), "anonymous": true]
                    } else {
                        ledger.events.append("\(own)@\(version)")
                        switch version {
                        case 1:
                            ledger.creates.append(own)
                            ledger.objects[own] = ["client": .int(Int64(client)), "round": .int(Int64(round)), "n": 0]
                        case 2:
                            ledger.objects[own]?["n"] = 1
                            ledger.objects[own]?["note"] = "x"
                        default:
                            ledger.objects[own] = nil
                            ledger.deleted.insert(own)
                        }
                    }
                case .count(let count):
                    if response.result?["count"] != .int(Int64(count)) {
                        ledger.problems.append("client \(client) round \(round): expected count \(count): \(response)")
                    }
                case .error(let code):
                    if response.errorCode != code {
                        ledger.problems.append(
                            "client \(client) round \(round) line \(index): expected \(code), got \(response)")
                    } else if code == "conflict" && index == 2 && response["error"]?["currentVersion"] != 2 {
                        ledger.problems.append("stale update without currentVersion 2: \(response)")
                    }
                }
            }
        }
    }

    /// Read a shared object's version, update it only if still at it: exactly one client wins each version.
    static func contend(client: Int, attempt: Int, _ connection: TestConnection, _ ledger: Locked<Ledger>) throws {
        let id = shared[(client + attempt) % shared.count]
        let current = try connection.request(["op": "get", "collection": "Work", "id": .string(id)])
        guard let version = current.version else {
            return ledger.withLock { $0.problems.append("get \(id): \(current)") }
        }
        let response = try connection.request([
            "op": "update", "collection": "Work", "id": .string(id), "ifVersion": .int(version),
            "patch": ["last": .int(Int64(client))],
        ])
        ledger.withLock { ledger in
            if response.version == version + 1 {
                ledger.events.append("\(id)@\(version + 1)")
                ledger.sharedVersions[id, default: []].append((version + 1, client))
            } else if response.errorCode == "conflict" {
                if let now = response["error"]?["currentVersion"]?.integerValue, now > version {
                    return
                }
                ledger.problems.append("conflict on \(id) v\(version) without a later currentVersion: \(response)")
            } else {
                ledger.problems.append("update \(id) at v\(version): \(response)")
            }
        }
    }

    /// Sequences 1...N without gaps; exactly the acknowledged events, each once.
    static func checkLog(_ connection: TestConnection, against expected: Ledger) throws {
        var events: [JSON] = []
        var lastSeq: JSON?
        while true {
            let page = try connection.request(["op": "events", "after": .int(Int64(events.count)), "limit": 1000])
            let batch = try #require(page.result?["events"]?.arrayValue, "\(page)")
            lastSeq = page.result?["lastSeq"]
            if batch.isEmpty { break }
            events += batch
        }
        #expect(
            events.map { $0["seq"]?.integerValue ?? -1 }
                == Array(1...Int64(max(events.count, 1))).prefix(events.count).map { $0 }, "sequences 1...N")
        #expect(lastSeq == .int(Int64(events.count)))
        #expect(
            events.count == expected.events.count,
            "\(events.count) events in the log, \(expected.events.count) writes acknowledged")

        let logged = events.map { "\($0["id"]?.stringValue ?? "?")@\($0["version"]?.integerValue ?? -1)" }
        #expect(logged.sorted() == expected.events.sorted(), "the log holds exactly the acknowledged writes")
        let createdIDs = events.filter { $0["type"] == "created" }.compactMap { $0["id"]?.stringValue }
        #expect(createdIDs.sorted() == expected.creates.sorted(), "each acknowledged create appears exactly once")
        #expect(Set(createdIDs).count == createdIDs.count)
        #expect(!events.contains { ($0["id"]?.stringValue ?? "").hasPrefix("missing-") })
        #expect(!events.contains { $0["data"]?["_bad"] != nil || $0["patch"]?["n"] == 99 || $0["data"]?["n"] == -5 })
    }

    /// get and list show exactly the expected objects.
    static func checkObjects(_ connection: TestConnection, against expected: Ledger) throws {
        var listed: [String: JSON] = [:]
        var after: JSON = .null
        repeat {
            let page = try connection.request(["op": "list", "collection": "Work", "limit": 200, "after": after])
            for item in try #require(page.result?["items"]?.arrayValue, "\(page)") {
                if let id = item["id"]?.stringValue { listed[id] = item }
            }
            after = page.result?["next"] ?? .null
        } while after != .null
        #expect(Set(listed.keys) == Set(expected.objects.keys), "list holds exactly the live objects")
        #expect(
            try connection.request(["op": "count", "collection": "Work"]).result?["count"]
                == .int(Int64(expected.objects.count)))

        for (id, fields) in expected.objects where !shared.contains(id) {
            let fetched = try connection.request(["op": "get", "collection": "Work", "id": .string(id)])
            var data = fetched.result?.objectValue ?? JSONObject()
            for system in ["collection", "id", "version", "createdAt", "updatedAt"] { data[system] = nil }
            #expect(data == fields, "\(id): \(fetched)")
            #expect(listed[id] == fetched.result, "list and get agree on \(id)")
        }
        for id in expected.deleted {
            #expect(
                try connection.request(["op": "get", "collection": "Work", "id": .string(id)]).errorCode == "not_found")
        }
    }

    /// Each version of a shared object was won by one client; the object holds the last winner.
    static func checkSharedObjects(_ connection: TestConnection, against expected: Ledger) throws {
        for id in shared {
            let wins = (expected.sharedVersions[id] ?? []).sorted { $0.version < $1.version }
            #expect(
                wins.map(\.version) == Array(stride(from: Int64(2), to: Int64(2 + wins.count), by: 1)),
                "\(id): versions won \(wins.map(\.version))")
            let fetched = try connection.request(["op": "get", "collection": "Work", "id": .string(id)])
            #expect(fetched.version == Int64(1 + wins.count), "\(fetched)")
            #expect(fetched.result?["last"] == .int(Int64(wins.last?.client ?? -1)), "\(fetched)")
        }
    }

    /// The stopped daemon's data directory, replayed from its log into a new store, is the same.
    static func checkReplay(dataDirectory: String) throws {
        let live = try Store(directory: dataDirectory)
        defer { live.close() }
        try withTemporaryDirectory { directory in
            let replayed = try replayLog(of: live, into: directory + "/replayed")
            defer { replayed.close() }
            let differences = try live.differences(from: replayed)
            #expect(differences.isEmpty, "replaying the log gives another state: \(differences.prefix(10))")
            let liveHead = try live.read { try $0.head() }
            let replayedHead = try replayed.read { try $0.head() }
            #expect(liveHead.sequence == replayedHead.sequence && liveHead.hash == replayedHead.hash)
        }
    }
}
