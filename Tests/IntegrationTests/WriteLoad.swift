import FolioHarness
import FolioJSON
import Foundation
import Testing

/// Clients that write version after version of objects of their own while a fault strikes, keeping
/// what each write was answered; `check` then says whether a foliod on the same data holds what
/// those answers promised:
///
/// - an acknowledged write is there, with its version and data;
/// - a write refused as not stored ("the write was not stored") is not;
/// - a write left unanswered, or answered that it was applied but could not be flushed, is there
///   entirely or not at all;
/// - the log runs 1, 2, 3, … without a gap, every object's versions follow one another, and
///   `verify` finds the state and views equal to the log.
///
/// Each object goes create (version 1), update to 2, update to 3, its data carrying its client,
/// its number and its version, so that a stored object shows which write made it. A client moves to
/// a new object after a refusal, and ends when its connection ends.
final class WriteLoad: @unchecked Sendable {
    private struct Object {
        /// The last acknowledged version (0: none).
        var acknowledged: Int64 = 0
        /// The write after `acknowledged` was sent and may or may not have been stored.
        var inDoubt = false
    }

    private struct State {
        var objects: [String: Object] = [:]
        var acknowledged = 0
        var refused = 0
        var doubtful = 0
        var problems: [String] = []
        var running = 0
    }

    let clients: Int
    let payload: String
    private let state = Locked(State())
    private let stopping = Locked(false)

    init(clients: Int = 4, payloadBytes: Int = 100) {
        self.clients = clients
        payload = String(repeating: "p", count: payloadBytes)
    }

    var acknowledged: Int { state.current.acknowledged }
    var refused: Int { state.current.refused }
    /// Writes answered that they were applied but not flushed, or left unanswered.
    var doubtful: Int { state.current.doubtful }
    var isRunning: Bool { state.current.running > 0 }

    /// Starts the clients on `socket`, each on a thread of its own.
    func start(socket: String) {
        state.withLock { $0.running = clients }
        for client in 0..<clients {
            let thread = Thread { [self] in
                defer { state.withLock { $0.running -= 1 } }
                run(client: client, socket: socket)
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// Waits until `condition` holds or the clients have all ended, at most `timeout` s; whether
    /// `condition` holds.
    @discardableResult
    func wait(timeout: Double = 30, until condition: (WriteLoad) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition(self) && isRunning && Date() < deadline { usleep(2_000) }
        return condition(self)
    }

    /// Asks the clients to end after their current write, and waits for them (at most 30 s).
    func stop() {
        stopping.withLock { $0 = true }
        wait { !$0.isRunning }
    }

    private func run(client: Int, socket: String) {
        guard let connection = try? TestConnection(path: socket, timeout: 20) else { return }
        var number = 0
        while !stopping.current {
            let id = "c\(client)-\(number)"
            number += 1
            versions: for version in Int64(1)...3 {
                guard !stopping.current else { return }
                let request: JSON =
                    version == 1
                    ? [
                        "op": "create", "collection": "Load", "id": .string(id),
                        "data": [
                            "client": .int(Int64(client)), "number": .int(Int64(number - 1)), "step": 1,
                            "pad": .string(payload),
                        ],
                    ]
                    : [
                        "op": "update", "collection": "Load", "id": .string(id), "patch": ["step": .int(version)],
                        "ifVersion": .int(version - 1),
                    ]
                state.withLock { $0.objects[id, default: Object()].inDoubt = true }
                guard (try? connection.send(request)) != nil, let response = try? connection.readJSON() else {
                    state.withLock { $0.doubtful += 1 }
                    return
                }
                let outcome: Bool = state.withLock { state in
                    if response.isOK, response.version == version {
                        state.objects[id] = Object(acknowledged: version, inDoubt: false)
                        state.acknowledged += 1
                        return true
                    }
                    if response.errorCode == "unavailable", let message = response.errorMessage {
                        if message.contains("was not stored") {
                            state.objects[id]?.inDoubt = false
                            state.refused += 1
                        } else {
                            state.doubtful += 1
                        }
                        return false
                    }
                    state.problems.append("\(id) v\(version): \(response)")
                    return false
                }
                if !outcome { break versions }
            }
        }
    }

    /// What `check` found wrong; empty if the store holds what the answers promised. Run against a
    /// foliod started on the data after the fault (the clients must have ended).
    func check(_ daemon: RunningDaemon) throws -> [String] {
        let final = state.current
        var problems = final.problems
        let connection = try daemon.connect()
        var present = 0
        for (id, object) in final.objects.sorted(by: { $0.key < $1.key }) {
            let fetched = try connection.request(["op": "get", "collection": "Load", "id": .string(id)])
            let stored: Int64
            if fetched.errorCode == "not_found" {
                stored = 0
            } else if let result = fetched.result, let version = result["version"]?.integerValue {
                stored = version
                present += 1
                let parts = id.dropFirst().split(separator: "-")
                if result["step"]?.integerValue != version || result["client"]?.integerValue != Int64(parts[0])
                    || result["number"]?.integerValue != Int64(parts[1]) || result["pad"]?.stringValue != payload
                {
                    problems.append("\(id) at version \(version) holds other data: \(result)")
                }
            } else {
                problems.append("\(id): \(fetched)")
                continue
            }
            let allowed = object.inDoubt ? [object.acknowledged, object.acknowledged + 1] : [object.acknowledged]
            if !allowed.contains(stored) {
                problems.append(
                    "\(id): acknowledged v\(object.acknowledged)\(object.inDoubt ? " (next write in doubt)" : ""), stored v\(stored)"
                )
            }
        }
        let stats = try #require(try connection.request(["op": "stats"]).result)
        let counted = stats["collections"]?["Load"]?.integerValue ?? 0
        if counted != Int64(present) { problems.append("stats counts \(counted) Load objects, \(present) were found") }
        problems += try checkLog(connection)
        let verify = try connection.request(["op": "verify"])
        if verify.result?["ok"] != .bool(true) { problems.append("verify: \(verify)") }
        return problems
    }

    /// The log has no gap, and each object's events carry versions 1, 2, 3 in order.
    private func checkLog(_ connection: TestConnection) throws -> [String] {
        var problems: [String] = []
        var after: Int64 = 0
        var versions: [String: Int64] = [:]
        while true {
            let page = try connection.request(["op": "events", "after": .int(after), "limit": 1000])
            guard let result = page.result, let events = result["events"]?.arrayValue else {
                return ["events: \(page)"]
            }
            for event in events {
                guard let sequence = event["seq"]?.integerValue, sequence == after + 1 else {
                    return problems + ["the log skips from \(after) to \(event["seq"]?.description ?? "?")"]
                }
                after = sequence
                if event["collection"] == "Load", let id = event["id"]?.stringValue {
                    let version = event["version"]?.integerValue ?? 0
                    if version != versions[id, default: 0] + 1 {
                        problems.append("event \(sequence): \(id) v\(version) after v\(versions[id, default: 0])")
                    }
                    versions[id] = version
                }
            }
            if events.isEmpty || after >= result["lastSeq"]?.integerValue ?? 0 { return problems }
        }
    }
}
