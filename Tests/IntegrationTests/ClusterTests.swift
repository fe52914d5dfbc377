import FolioCluster
import FolioHarness
import FolioJSON
import Foundation
import Glibc
import Testing

/// Several foliod nodes on one real PostgreSQL (docs/CLUSTER.md), started in a temp directory.
final class TestCluster: @unchecked Sendable {
    let directory: String
    let postgres: PostgresServer
    private(set) var nodes: [RunningDaemon] = []
    let arguments: [String]

    /// `postgres`: settings of PostgreSQL's besides fsync.
    init(directory: String, nodes count: Int, arguments: [String] = [], postgres settings: [String: String] = [:])
        throws
    {
        self.directory = directory
        // fsync off: the tests kill foliod and stop PostgreSQL, never the machine.
        postgres = try PostgresServer(settings: ["fsync": "off"].merging(settings) { $1 })
        self.arguments = arguments
        for _ in 0..<count { try addNode() }
    }

    var logArgument: String { "postgres:" + postgres.conninfo }

    /// Starts another node on an empty data directory of its own; it catches up before it answers.
    @discardableResult
    func addNode() throws -> RunningDaemon {
        let nodeDirectory = directory + "/n\(nodes.count + 1)"
        try FileManager.default.createDirectory(atPath: nodeDirectory, withIntermediateDirectories: true)
        let node = RunningDaemon(directory: nodeDirectory, arguments: ["--log", logArgument] + arguments)
        nodes.append(node)
        try node.start(timeout: 120)
        return node
    }

    /// The log's head in PostgreSQL: its sequence and chain hash.
    func logHead() throws -> (sequence: Int64, hash: String) {
        let line = try postgres.psql("SELECT seq || ' ' || encode(hash, 'hex') FROM folio_head").trimmingCharacters(
            in: .whitespacesAndNewlines)
        let parts = line.split(separator: " ")
        guard parts.count == 2, let sequence = Int64(parts[0]) else { throw DaemonError("folio_head reads \(line)") }
        return (sequence, String(parts[1]))
    }

    /// Waits until every running node has applied the log's head, then checks that each holds the
    /// same chain head as PostgreSQL and the same state digest, and that its state replays from its
    /// log (`verify`). Returns the digest.
    @discardableResult
    func converge(timeout: Double = 30) throws -> String {
        let head = try logHead()
        let deadline = Date().addingTimeInterval(timeout)
        var digests: [String] = []
        for (index, node) in nodes.enumerated() where node.isRunning {
            while true {
                let stats = try node.request(["op": "stats"])
                if stats.result?["lastSeq"]?.integerValue == head.sequence {
                    #expect(
                        stats.result?["chainHead"]?.stringValue == head.hash,
                        "node \(index + 1)'s log differs from PostgreSQL's")
                    #expect(stats.result?["cluster"]?["state"] == "following", "node \(index + 1): \(stats)")
                    digests.append(stats.result?["digest"]?.stringValue ?? "?")
                    break
                }
                guard Date() < deadline else {
                    throw DaemonError("node \(index + 1) did not reach event \(head.sequence): \(stats)")
                }
                usleep(20_000)
            }
            let verified = try node.request(["op": "verify"])
            #expect(verified.result?["ok"] == .bool(true), "node \(index + 1): \(verified)")
        }
        #expect(Set(digests).count == 1, "nodes' digests differ: \(digests)")
        return digests.first ?? ""
    }

    /// After PostgreSQL came back: each node takes a write within 20 s, without a restart of foliod.
    /// Each node's own: a node whose attempt met PostgreSQL still starting up refuses writes for the
    /// retry interval after it (0.1 s) even when another node already writes.
    func expectWritesToResumeOnEveryNode() throws {
        for (index, node) in nodes.enumerated() {
            let deadline = Date().addingTimeInterval(20)
            var resumed = false
            while Date() < deadline && !resumed {
                resumed = try node.request(["op": "create", "collection": "Task", "data": ["after": true]]).isOK
                if !resumed { usleep(100_000) }
            }
            #expect(resumed, "node \(index + 1) takes no write since PostgreSQL came back")
        }
    }

    /// Every event of the log as node `index` holds it, checked gap-free from 1.
    func events(on index: Int = 0) throws -> [JSON] {
        let connection = try nodes[index].connect()
        var events: [JSON] = []
        var after: Int64 = 0
        while true {
            let page = try connection.request(["op": "events", "after": .int(after), "limit": 1000])
            guard let batch = page.result?["events"]?.arrayValue else { throw DaemonError("events answered \(page)") }
            if batch.isEmpty { break }
            for event in batch {
                let sequence = event["seq"]?.integerValue ?? -1
                guard sequence == after + 1 else { throw DaemonError("the log skips from \(after) to \(sequence)") }
                after = sequence
                events.append(event)
            }
        }
        return events
    }

    func shutDown() {
        for node in nodes { node.shutDown() }
        postgres.remove()
    }
}

func withCluster<R>(
    nodes: Int, arguments: [String] = [], postgres settings: [String: String] = [:], _ body: (TestCluster) throws -> R
) throws -> R {
    try withTemporaryDirectory { directory in
        let cluster = try TestCluster(directory: directory, nodes: nodes, arguments: arguments, postgres: settings)
        defer { cluster.shutDown() }
        do {
            return try body(cluster)
        } catch {
            for (index, node) in cluster.nodes.enumerated() { Issue.record("node \(index + 1)'s log:\n\(node.log)") }
            throw error
        }
    }
}

/// An acknowledged write: what the history check looks for in the log.
struct AcknowledgedWrite: Sendable {
    let id: String
    let version: Int64
    let sequence: Int64
    let deleted: Bool
}

/// Random creates, updates and deletes of `ids` objects of `Task`, from `clients` threads spread
/// over the cluster's nodes; returns what was acknowledged. Refusals (`conflict`, `not_found`) are
/// the races the test wants; `unavailable` is counted apart.
func clusterLoad(
    _ cluster: TestCluster, nodes: [Int], clients: Int, writes: Int, ids: Int, seed: UInt64,
    unavailable: Locked<Int>? = nil
) -> (acknowledged: [AcknowledgedWrite], errors: [(index: Int, error: any Error)]) {
    let acknowledged = Locked<[AcknowledgedWrite]>([])
    let sockets = nodes.map { cluster.nodes[$0].socketPath }
    let errors = runOnThreads(clients) { client in
        var random = SplitMix64(seed: seed &+ UInt64(client))
        var connection = try TestConnection(path: sockets[client % sockets.count])
        for step in 0..<writes {
            let id = "t\(random.next() % UInt64(ids))"
            let roll = random.next() % 10
            let request: JSON =
                roll < 3
                ? [
                    "op": "create", "collection": "Task", "id": .string(id),
                    "data": ["client": .int(Int64(client)), "step": .int(Int64(step))],
                ]
                : roll < 8
                    ? [
                        "op": "update", "collection": "Task", "id": .string(id),
                        "patch": ["client": .int(Int64(client)), "step": .int(Int64(step))],
                    ]
                    : ["op": "delete", "collection": "Task", "id": .string(id)]
            let response: JSON
            do { response = try connection.request(request) } catch {
                // The node went away (a test kills it): a write in flight is in doubt, like any unanswered one.
                guard unavailable != nil else { throw error }
                unavailable?.withLock { $0 += 1 }
                usleep(100_000)
                if let fresh = try? TestConnection(path: sockets[client % sockets.count], timeout: 2) {
                    connection = fresh
                }
                continue
            }
            if response.isOK {
                guard let sequence = response["seq"]?.integerValue, let version = response.version else {
                    throw DaemonError("a write answered without seq or version: \(response)")
                }
                acknowledged.withLock {
                    $0.append(AcknowledgedWrite(id: id, version: version, sequence: sequence, deleted: roll >= 8))
                }
            } else if response.errorCode == "unavailable", let unavailable {
                unavailable.withLock { $0 += 1 }
            } else if !["conflict", "not_found"].contains(response.errorCode ?? "") {
                throw DaemonError("unexpected answer \(response) to \(request)")
            }
        }
    }
    return (acknowledged.current, errors)
}

/// Every acknowledged write is the event at its sequence, with its id and version.
func checkHistory(_ acknowledged: [AcknowledgedWrite], against events: [JSON]) {
    for write in acknowledged {
        guard write.sequence >= 1, write.sequence <= events.count else {
            Issue.record("acknowledged write \(write) is beyond the log's \(events.count) events")
            continue
        }
        let event = events[Int(write.sequence) - 1]
        #expect(
            event["id"]?.stringValue == write.id && event["version"]?.integerValue == write.version,
            "acknowledged \(write), the log holds \(event)")
        #expect((event["type"] == "deleted") == write.deleted, "acknowledged \(write), the log holds \(event)")
    }
}

@Suite struct ClusterTests {
    @Test func threeNodesUnderConcurrentWritesConvergeToTheLog() throws {
        try withCluster(nodes: 3) { cluster in
            let (acknowledged, errors) = clusterLoad(
                cluster, nodes: [0, 1, 2], clients: 9, writes: 150, ids: 40, seed: 1)
            #expect(errors.isEmpty, "\(errors)")
            #expect(acknowledged.count > 300, "\(acknowledged.count) writes acknowledged")
            try cluster.converge()
            let events = try cluster.events(on: 2)
            #expect(
                events.count == acknowledged.count,
                "every event is an acknowledged write and every acknowledged write one event")
            checkHistory(acknowledged, against: events)
            // Each accepted write was stored once on its node: kept as executed there when the log
            // appended it as executed, applied from the log when another node's events came first.
            var kept: Int64 = 0
            var reapplied: Int64 = 0
            for node in cluster.nodes {
                let status = try node.request(["op": "stats"]).result?["cluster"]
                kept += status?["keptWrites"]?.integerValue ?? -1_000_000
                reapplied += status?["reappliedWrites"]?.integerValue ?? -1_000_000
            }
            #expect(
                kept + reapplied == Int64(events.count),
                "\(kept) kept and \(reapplied) reapplied writes for \(events.count) events")
            #expect(kept > 0 && reapplied > 0, "\(kept) kept and \(reapplied) reapplied writes")
            // A node's own writes are readable at once on it; watchers see other nodes' writes.
            let connection = try cluster.nodes[1].connect()
            let created = try connection.request(["op": "create", "collection": "Note", "data": ["text": "mine"]])
            let id = try #require(created.result?["id"])
            #expect(try connection.request(["op": "get", "collection": "Note", "id": id]).result?["text"] == "mine")
        }
    }

    @Test func ifVersionRacesAcrossNodesHaveExactlyOneWinner() throws {
        try withCluster(nodes: 3) { cluster in
            for round in 0..<5 {
                let id = "race\(round)"
                #expect(
                    try cluster.nodes[0].request([
                        "op": "create", "collection": "Doc", "id": .string(id), "data": ["v": 0],
                    ]).isOK)
                let seq = try cluster.logHead().sequence
                let outcomes = Locked<[String]>([])
                let errors = runOnThreads(6) { client in
                    let node = cluster.nodes[client % 3]
                    let connection = try node.connect()
                    // Each sees the create first, then all race from version 1.
                    _ = try connection.request([
                        "op": "get", "collection": "Doc", "id": .string(id), "minSeq": .int(seq),
                    ])
                    let response = try connection.request(
                        [
                            "op": "update", "collection": "Doc", "id": .string(id), "ifVersion": 1,
                            "patch": ["v": .int(Int64(client))],
                        ])
                    outcomes.withLock { $0.append(response.isOK ? "ok" : response.errorCode ?? "?") }
                }
                #expect(errors.isEmpty, "\(errors)")
                #expect(outcomes.current.filter { $0 == "ok" }.count == 1, "round \(round): \(outcomes.current)")
                #expect(outcomes.current.filter { $0 == "conflict" }.count == 5, "round \(round): \(outcomes.current)")
            }
            try cluster.converge()
        }
    }

    @Test func uniqueKeyRacesAcrossNodesHaveExactlyOneWinner() throws {
        try withCluster(nodes: 3) { cluster in
            let defined = try cluster.nodes[0].request(
                ["op": "view.define", "name": "byEmail", "collection": "Person", "sort": ["email"], "unique": true])
            #expect(defined.isOK, "\(defined)")
            let outcomes = Locked<[Int: [String]]>([:])
            let errors = runOnThreads(9) { client in
                let connection = try cluster.nodes[client % 3].connect()
                for round in 0..<8 {
                    let email = "p\((round + client) % 8)@example.org"
                    let response = try connection.request([
                        "op": "create", "collection": "Person", "data": ["email": .string(email)],
                    ])
                    outcomes.withLock {
                        $0[(round + client) % 8, default: []].append(response.isOK ? "ok" : response.errorCode ?? "?")
                    }
                }
            }
            #expect(errors.isEmpty, "\(errors)")
            for (key, results) in outcomes.current {
                #expect(results.filter { $0 == "ok" }.count == 1, "email \(key): \(results)")
                #expect(results.filter { $0 == "conflict" }.count == 8, "email \(key): \(results)")
            }
            try cluster.converge()
            #expect(try cluster.nodes[2].request(["op": "count", "view": "byEmail"]).result?["count"] == 8)
        }
    }

    /// A delete with a `deny` rule on one node races a create of a referrer on another: either the
    /// delete is refused, or it was ordered before the create. Never a delete after the referrer
    /// that it should have seen. Batches and cascades made on one node apply alike on the others.
    @Test func deleteRulesAndBatchesHoldAcrossNodes() throws {
        try withCluster(nodes: 2) { cluster in
            let schema = try cluster.nodes[0].request(
                [
                    "op": "schema.define", "collection": "Item",
                    "fields": ["target": ["type": "ref", "ref": "Target", "onTargetDelete": "deny"]],
                ])
            #expect(schema.isOK, "\(schema)")
            var deletesAfterReferrer = 0
            var outcomes: [String] = []
            for round in 0..<20 {
                let target = "T\(round)"
                let made = try cluster.nodes[0].request([
                    "op": "create", "collection": "Target", "id": .string(target), "data": [:],
                ])
                let seq = try #require(made["seq"]?.integerValue)
                #expect(
                    try cluster.nodes[1].request([
                        "op": "get", "collection": "Target", "id": .string(target), "minSeq": .int(seq),
                    ]).isOK)
                let answers = Locked<[Int: JSON]>([:])
                let errors = runOnThreads(2) { side in
                    let response =
                        side == 0
                        ? try cluster.nodes[0].request(["op": "delete", "collection": "Target", "id": .string(target)])
                        : try cluster.nodes[1].request([
                            "op": "create", "collection": "Item",
                            "data": ["target": ["$ref": .string("Target/\(target)")]],
                        ])
                    answers.withLock { $0[side] = response }
                }
                #expect(errors.isEmpty, "\(errors)")
                let delete = answers.current[0] ?? .null
                let create = answers.current[1] ?? .null
                #expect(create.isOK, "\(create)")
                #expect(delete.isOK || delete.errorCode == "conflict", "\(delete)")
                outcomes.append(delete.isOK ? "deleted" : "denied")
                if delete.isOK, let deleted = delete["seq"]?.integerValue, let created = create["seq"]?.integerValue,
                    deleted > created
                {
                    deletesAfterReferrer += 1
                }
            }
            #expect(
                deletesAfterReferrer == 0, "a delete with deny went through after a referrer was stored: \(outcomes)")
            // A batch of ten creates on one node, then a cascade from the other.
            let cascade = try cluster.nodes[1].request(
                [
                    "op": "schema.define", "collection": "Line",
                    "fields": ["order": ["type": "ref", "ref": "Order", "onTargetDelete": "cascade"]],
                ])
            #expect(cascade.isOK, "\(cascade)")
            #expect(
                try cluster.nodes[1].request(["op": "create", "collection": "Order", "id": "o1", "data": [:]]).isOK)
            let ops: [JSON] = (0..<10).map { index in
                [
                    "op": "create", "collection": "Line", "id": .string("l\(index)"),
                    "data": ["order": ["$ref": "Order/o1"]],
                ]
            }
            let batch = try cluster.nodes[0].request(["op": "batch", "ops": .array(ops)])
            #expect(batch.isOK, "\(batch)")
            let gone = try cluster.nodes[1].request(["op": "delete", "collection": "Order", "id": "o1"])
            #expect(gone.isOK, "\(gone)")
            try cluster.converge()
            #expect(try cluster.nodes[0].request(["op": "count", "collection": "Line"]).result?["count"] == 0)
        }
    }

    @Test func aRetriedRequestKeyOnAnotherNodeGetsTheFirstResult() throws {
        try withCluster(nodes: 2) { cluster in
            let request: JSON = ["op": "create", "collection": "Order", "data": ["total": 12], "requestKey": "order-1"]
            let first = try cluster.nodes[0].request(request)
            #expect(first.isOK, "\(first)")
            // At once, before node 2 may have applied it: its proposal is refused and it catches up.
            let again = try cluster.nodes[1].request(request)
            var replayed = try #require(first.result?.objectValue)
            replayed["replayed"] = .bool(true)
            #expect(again.result == .object(replayed), "\(again) after \(first)")
            #expect(again["seq"] == first["seq"])
            let different = try cluster.nodes[1].request([
                "op": "create", "collection": "Order", "data": ["total": 13], "requestKey": "order-1",
            ])
            #expect(different.errorCode == "conflict", "\(different)")
            #expect(try cluster.logHead().sequence == 1)
            try cluster.converge()
        }
    }

    /// A node refuses a write only after catching up with the log: a write made possible on another
    /// node just before (the object created, its version moved) is never refused as `not_found` or
    /// `conflict`, even when this node has not heard of it.
    @Test func aWriteIsNeverRefusedOnAStaleCopy() throws {
        try withCluster(nodes: 2) { cluster in
            let writer = try cluster.nodes[0].connect()
            let other = try cluster.nodes[1].connect()
            for round in 0..<3 {
                // The nodes' LISTEN connections end; each connects again a second later. Until
                // then, node 2 hears nothing of node 1's appends.
                _ = try cluster.postgres.psql(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN folio_log'")
                for index in 0..<10 {
                    // Node 2's own write: it last found itself at the log's head just now.
                    #expect(try other.request(["op": "create", "collection": "Note", "data": [:]]).isOK)
                    let id = JSON.string("fresh\(round)-\(index)")
                    #expect(try writer.request(["op": "create", "collection": "Doc", "id": id, "data": ["v": 0]]).isOK)
                    let updated = try other.request([
                        "op": "update", "collection": "Doc", "id": id, "ifVersion": 1, "patch": ["v": 1],
                    ])
                    #expect(updated.isOK, "update on node 2 right after the create on node 1: \(updated)")
                    #expect(
                        try writer.request([
                            "op": "update", "collection": "Doc", "id": id, "ifVersion": 2, "patch": ["v": 2],
                        ]).isOK)
                    let deleted = try other.request(["op": "delete", "collection": "Doc", "id": id, "ifVersion": 3])
                    #expect(deleted.isOK, "delete on node 2 right after an update on node 1: \(deleted)")
                }
                usleep(1_200_000)
            }
            try cluster.converge()
        }
    }

    @Test func minSeqReadsOnAnotherNodeSeeTheWrite() throws {
        try withCluster(nodes: 2, arguments: ["--min-seq-timeout", "0.5"]) { cluster in
            let reader = try cluster.nodes[1].connect()
            for index in 0..<50 {
                let written = try cluster.nodes[0].request([
                    "op": "create", "collection": "Note", "id": .string("n\(index)"), "data": ["i": .int(Int64(index))],
                ])
                let seq = try #require(written["seq"]?.integerValue)
                let read = try reader.request([
                    "op": "get", "collection": "Note", "id": .string("n\(index)"), "minSeq": .int(seq),
                ])
                #expect(read.result?["i"]?.integerValue == Int64(index), "\(read)")
            }
            // Node 1 alone wrote: the log appended each write as node 1 executed it, which kept it.
            let status = try cluster.nodes[0].request(["op": "stats"]).result?["cluster"]
            #expect(status?["keptWrites"] == 50 && status?["reappliedWrites"] == 0, "\(String(describing: status))")
            // An event no node has: unavailable once the wait is over, and the connection goes on.
            let started = Date()
            let future = try reader.request(["op": "count", "collection": "Note", "minSeq": 1_000_000])
            #expect(future.errorCode == "unavailable", "\(future)")
            #expect(Date().timeIntervalSince(started) < 3)
            #expect(try reader.request(["op": "count", "collection": "Note", "minSeq": 50]).result?["count"] == 50)
            let write = try reader.request(["op": "create", "collection": "Note", "data": [:], "minSeq": 1])
            #expect(write.errorCode == "bad_request", "\(write)")
            // File contents stay on the node that receives them: uploads are refused in a cluster.
            let upload = try reader.request(["op": "file.put", "name": "a.txt", "data": "aGk="])
            #expect(upload.errorCode == "bad_request" && upload.errorMessage?.contains("cluster") == true, "\(upload)")
            // A node says it is one of a cluster, and the CLI tells a person a write's event there.
            #expect(try reader.request(["op": "hello"]).result?["log"] == "postgres")
            let shown = try CLITests.folioOnATerminal("create", "Note", "i:=99", socket: cluster.nodes[1].socketPath)
            #expect(
                shown.status == 0
                    && shown.stdout.contains("(event 51; on another node of a cluster read it with --min-seq 51)"),
                "\(shown)")
        }
    }

    @Test func aNodeKilledUnderLoadCatchesUpAndAFreshNodeReplaysTheLog() throws {
        try withCluster(nodes: 3) { cluster in
            let victim = cluster.nodes[1]
            let unavailable = Locked(0)
            let killer = Thread {
                usleep(400_000)
                victim.killHard()
            }
            killer.start()
            let (acknowledged, errors) = clusterLoad(
                cluster, nodes: [0, 1, 2], clients: 6, writes: 200, ids: 60, seed: 7, unavailable: unavailable)
            #expect(errors.isEmpty, "\(errors)")
            while victim.isRunning { usleep(10_000) }
            try victim.start(timeout: 60)
            try cluster.converge()
            let fourth = try cluster.addNode()
            #expect(
                try fourth.request(["op": "stats"]).result?["lastSeq"]?.integerValue == (try cluster.logHead().sequence)
            )
            try cluster.converge()
            checkHistory(acknowledged, against: try cluster.events(on: 3))
        }
    }

    @Test func postgresStoppedMidLoadFailsWritesFastAndLosesNoAcknowledgedWrite() throws {
        try withCluster(nodes: 2, arguments: ["--log-timeout", "1"]) { cluster in
            let unavailable = Locked(0)
            let stopper = Thread {
                usleep(300_000)
                try? cluster.postgres.stop()
            }
            stopper.start()
            let started = Date()
            let (before, errors) = clusterLoad(
                cluster, nodes: [0, 1], clients: 4, writes: 300, ids: 50, seed: 11, unavailable: unavailable)
            #expect(errors.isEmpty, "\(errors)")
            #expect(unavailable.current > 0, "no write failed while PostgreSQL was down")
            // Writes failed fast: 1,200 writes, most refused, in far less than a timeout each.
            #expect(Date().timeIntervalSince(started) < 60)
            // Reads go on from the node's copy, and stats says PostgreSQL is unreachable.
            let stats = try cluster.nodes[0].request(["op": "stats"])
            #expect(stats.result?["cluster"]?["state"] == "unreachable", "\(stats)")
            #expect(try cluster.nodes[1].request(["op": "count", "collection": "Task"]).isOK)
            let refused = Date()
            let write = try cluster.nodes[0].request(["op": "create", "collection": "Task", "data": [:]])
            #expect(write.errorCode == "unavailable", "\(write)")
            #expect(Date().timeIntervalSince(refused) < 2)

            // A node restarted meanwhile comes up on its copy and serves reads.
            try cluster.nodes[1].restart()
            #expect(try cluster.nodes[1].request(["op": "stats"]).result?["cluster"]?["state"] == "unreachable")
            #expect(try cluster.nodes[1].request(["op": "count", "collection": "Task"]).isOK)

            try cluster.postgres.start()
            try cluster.expectWritesToResumeOnEveryNode()
            let (after, moreErrors) = clusterLoad(cluster, nodes: [0, 1], clients: 4, writes: 50, ids: 50, seed: 12)
            #expect(moreErrors.isEmpty, "\(moreErrors)")
            try cluster.converge()
            checkHistory(before + after, against: try cluster.events(on: 1))
        }
    }

    /// A write on a node whose connection to PostgreSQL broke waits no longer than `--log-timeout`,
    /// reconnection included, even when PostgreSQL takes connections but the node's set-up blocks
    /// (another session holds the lock under which nodes create the tables). It waited for the
    /// connection, then up to 10 s for the set-up, then for the version check and the append, each
    /// with a timeout of its own.
    @Test func aWriteWaitsNoLongerThanTheLogTimeoutWhenReconnectingBlocks() throws {
        try withCluster(nodes: 1, arguments: ["--log-timeout", "1"]) { cluster in
            let node = try cluster.nodes[0].connect()
            #expect(try node.request(["op": "create", "collection": "Task", "data": [:]]).isOK)
            let holder = try PostgresConnection(cluster.postgres.conninfo, timeout: 10)
            defer { holder.close() }
            try holder.execute("BEGIN", timeout: 10)
            try holder.execute("SELECT pg_advisory_xact_lock(7046105)", timeout: 10)
            _ = try cluster.postgres.psql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                    + "AND datname = current_database() AND query NOT LIKE '%7046105%'")
            for _ in 0..<3 {
                let started = Date()
                let write = try node.request(["op": "create", "collection": "Task", "data": [:]])
                let waited = Date().timeIntervalSince(started)
                #expect(write.errorCode == "unavailable", "\(write)")
                #expect(waited < 2.5, "the write waited \(waited) s with --log-timeout 1")
                usleep(200_000)
            }
            try holder.execute("ROLLBACK", timeout: 10)
            try cluster.expectWritesToResumeOnEveryNode()
            try cluster.converge()
        }
    }

    /// A write is answered, and an event applied, only once PostgreSQL's commit of it is durable
    /// (docs/CLUSTER.md, "Durability"). With PostgreSQL's WAL writer slowed to 10 s, anything
    /// committed without waiting for the WAL's flush stays in PostgreSQL's WAL buffers until some
    /// flush writes it, and an immediate stop (no shutdown checkpoint; the buffers are lost) keeps
    /// only what was flushed. Mid-load, it must keep every acknowledged write, and no node may have
    /// applied an event the restarted log does not hold: they converge to its head. (A build whose
    /// appends committed asynchronously and answered without a flush failed here every time: its
    /// last acknowledged writes were lost and the following node stopped, diverged.)
    @Test func anImmediateStopOfPostgresLosesNoAcknowledgedWriteAndNoNodeRunsAhead() throws {
        try withCluster(nodes: 2, arguments: ["--log-timeout", "1"], postgres: ["wal_writer_delay": "10s"]) { cluster in
            let unavailable = Locked(0)
            let stopped = DispatchSemaphore(value: 0)
            let stopper = Thread {
                usleep(400_000)
                try? cluster.postgres.stop(immediate: true)
                stopped.signal()
            }
            stopper.start()
            // One node takes the writes, the other follows: nothing but the nodes' own flushes
            // writes the WAL out. Once PostgreSQL is down, writes fail at once.
            let (before, errors) = clusterLoad(
                cluster, nodes: [0], clients: 2, writes: 3000, ids: 50, seed: 31, unavailable: unavailable)
            stopped.wait()
            #expect(errors.isEmpty, "\(errors)")
            #expect(unavailable.current > 0, "no write failed while PostgreSQL was down")
            #expect(before.count > 20, "too few writes acknowledged before the stop to test anything: \(before.count)")
            try cluster.postgres.start()
            try cluster.expectWritesToResumeOnEveryNode()
            try cluster.converge()
            checkHistory(before, against: try cluster.events(on: 1))
        }
    }

    /// An event that does not chain (here, written into PostgreSQL by hand): every node stops
    /// applying, says why in stats, refuses writes and keeps serving what it has; a node that
    /// starts on such a log refuses to start.
    @Test func aLogThatDoesNotChainStopsTheNodesInsteadOfServingWrongData() throws {
        try withCluster(nodes: 2) { cluster in
            #expect(
                try cluster.nodes[0].request([
                    "op": "create", "collection": "Note", "id": "n1", "data": ["text": "good"],
                ]).isOK)
            try cluster.converge()
            _ = try cluster.postgres.psql(
                """
                BEGIN;
                INSERT INTO folio_events SELECT seq + 1, convert_to('{"seq":' || (seq + 1) || ',"type":"deleted","at":"' || at
                    || '","collection":"Note","id":"n1","version":2,"by":{"uid":0,"gid":0,"pid":1}}', 'UTF8'), decode(repeat('ab', 32), 'hex')
                    FROM folio_head;
                UPDATE folio_head SET seq = seq + 1, hash = decode(repeat('ab', 32), 'hex');
                NOTIFY folio_log, '2';
                COMMIT;
                """)
            for node in cluster.nodes {
                let deadline = Date().addingTimeInterval(10)
                var state: JSON?
                while Date() < deadline {
                    state = try node.request(["op": "stats"]).result?["cluster"]
                    if state?["state"] == "diverged" { break }
                    usleep(20_000)
                }
                #expect(state?["state"] == "diverged", "\(String(describing: state))")
                #expect(state?["diverged"]?.stringValue?.contains("event 2") == true, "\(String(describing: state))")
                #expect(try node.request(["op": "get", "collection": "Note", "id": "n1"]).result?["text"] == "good")
                let write = try node.request(["op": "create", "collection": "Note", "data": [:]])
                #expect(write.errorCode == "unavailable", "\(write)")
            }
            let fresh = RunningDaemon(
                directory: cluster.directory + "/fresh", arguments: ["--log", cluster.logArgument])
            try FileManager.default.createDirectory(atPath: fresh.directory, withIntermediateDirectories: true)
            #expect(throws: (any Error).self) { try fresh.start(timeout: 20) }
            #expect(fresh.log.contains("event 2"), "\(fresh.log)")
        }
    }

    /// A log of several chunks: the joining node fetches ahead while it applies.
    @Test func aFreshNodeCatchesUpALogOfManyChunks() throws {
        try withCluster(nodes: 1) { cluster in
            let connection = try cluster.nodes[0].connect()
            for batch in 0..<5 {
                let ops: [JSON] = (0..<1000).map { index in
                    [
                        "op": "create", "collection": "Task",
                        "data": ["batch": .int(Int64(batch)), "index": .int(Int64(index))],
                    ]
                }
                #expect(try connection.request(["op": "batch", "ops": .array(ops)]).isOK)
            }
            let joined = try cluster.addNode()
            #expect(try joined.request(["op": "count", "collection": "Task"]).result?["count"] == 5000)
            #expect(joined.log.contains("caught up to event 5000 of 5000"), "\(joined.log)")
            try cluster.converge()
        }
    }

    /// A node commits its copy without flushing it (docs/CLUSTER.md, "The node's copy"): `DATA/unsynced`
    /// names the boot while it runs; a clean stop flushes and removes it; `kill -9` on the same boot
    /// keeps the copy; a copy left unflushed under another boot, or after a failed flush (injected by
    /// the I/O fault library), is damaged for all the node knows, so it is removed and caught up from
    /// the log.
    @Test func aCopyLeftUnflushedWhenTheMachineWentDownIsRebuiltFromTheLog() throws {
        try withCluster(nodes: 2) { cluster in
            let node = cluster.nodes[1]
            let marker = node.dataDirectory + "/unsynced"
            let boot = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            func write(_ count: Int, on index: Int) throws {
                let connection = try cluster.nodes[index].connect()
                for n in 0..<count {
                    #expect(
                        try connection.request(["op": "create", "collection": "Task", "data": ["n": .int(Int64(n))]])
                            .isOK)
                }
            }
            try write(20, on: 1)
            #expect(fileText(marker) == "boot \(boot)\n")

            #expect(try node.stop() == 0)
            #expect(
                !FileManager.default.fileExists(atPath: marker), "a clean stop flushes the copy and removes \(marker)")
            try node.start(timeout: 60)
            try write(20, on: 1)
            node.killHard()
            #expect(fileText(marker) == "boot \(boot)\n")
            try node.start(timeout: 60)
            #expect(!node.log.contains("removed the copy"), "\(node.log)")
            try cluster.converge()

            // The machine went down: the file names another boot, and pages of the copy never reached the disk.
            try write(10, on: 1)
            node.killHard()
            try "boot 00000000-0000-4000-8000-000000000000\n".write(toFile: marker, atomically: true, encoding: .utf8)
            let data = open(node.dataDirectory + "/data.mdb", O_WRONLY)
            #expect(data >= 0)
            let zeros = [UInt8](repeating: 0, count: 4096 * 6)
            #expect(pwrite(data, zeros, zeros.count, 4096 * 2) == zeros.count)
            close(data)
            try write(10, on: 0)
            try node.start(timeout: 60)
            #expect(node.log.contains("removed the copy of the log"), "\(node.log)")
            #expect(
                node.log.contains("when the machine went down (boot 00000000-0000-4000-8000-000000000000)"),
                "\(node.log)")
            try cluster.converge()
            #expect(try node.request(["op": "count", "collection": "Task"]).result?["count"] == 60)

            // A flush that fails (the node flushes its copy once a second, to learn of lost pages) leaves
            // the copy in doubt: the node stops, and its next start rebuilds the copy.
            let shim = try IOFaultShim(in: cluster.directory)
            #expect(try node.stop() == 0)
            node.environment = shim.environment
            try node.start(timeout: 60)
            try shim.set(
                .init(calls: "fdatasync", nth: 1, error: "EIO", sticky: false, path: node.dataDirectory + "/data.mdb"))
            #expect(node.waitForExit(timeout: 20) == 74, "\(node.log)")
            #expect(
                fileText(marker).hasPrefix(
                    "in doubt: a failed flush of data.mdb (fdatasync data.mdb: Input/output error)"))
            node.environment = [:]
            try write(10, on: 0)
            try node.start(timeout: 60)
            #expect(node.log.contains("since a flush of it failed (a failed flush of data.mdb"), "\(node.log)")
            try cluster.converge()
            #expect(try node.request(["op": "count", "collection": "Task"]).result?["count"] == 70)
            #expect(try cluster.events(on: 1).count == 70)
        }
    }

    @Test func aDataDirectoryOfAnotherLogIsRefused() throws {
        try withCluster(nodes: 1) { cluster in
            #expect(try cluster.nodes[0].request(["op": "create", "collection": "Note", "data": [:]]).isOK)
            // A single node's store with its own history.
            let stray = RunningDaemon(directory: cluster.directory + "/stray")
            try FileManager.default.createDirectory(atPath: stray.directory, withIntermediateDirectories: true)
            try stray.start()
            #expect(try stray.request(["op": "create", "collection": "Other", "data": [:]]).isOK)
            try stray.stop()
            let joined = RunningDaemon(
                directory: cluster.directory + "/stray", arguments: ["--log", cluster.logArgument])
            #expect(throws: (any Error).self) { try joined.start(timeout: 20) }
            #expect(joined.log.contains("belongs to another log"), "\(joined.log)")
        }
    }
}
