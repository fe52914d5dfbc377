import FolioJSON
import Foundation
import Synchronization

/// A client of foliod: one Unix-socket connection, shared by any number of tasks.
///
/// ```swift
/// let folio = try await Folio.connect()
/// let item = try await TodoListItem(title: "Buy milk").save(on: folio)
/// ```
///
/// Requests from concurrent tasks are pipelined on the one connection and matched to their answers
/// by tag. When the connection drops (foliod restarted), the next request reconnects, waiting up to
/// `reconnectTimeout` for the daemon to come back; a request that was in flight is sent once more
/// on the new connection: a read as it is, a write (`create`, `update`, `delete`, `batch`) with the
/// same `requestKey`, so the server answers the first result again instead of writing twice.
///
/// Every call runs on the caller's actor (its `isolation` parameter defaults to `#isolation`). A
/// request that finds no other reader on the connection reads its own answer there, blocking for
/// the round trip (at most 2 ms, then it waits without blocking): that is what keeps a `get` within
/// 1.2x of raw socket lines. While a live query runs on the connection, answers come through its
/// reader thread instead.
public final class Folio: Sendable {
    /// The socket this client connects to.
    public let socketPath: String
    /// How long a request waits for foliod to accept connections again after losing one.
    public let reconnectTimeout: Duration

    private struct State {
        var connection: Connection?
        var isClosed = false
    }
    private let state = Mutex(State())

    private init(socketPath: String, reconnectTimeout: Duration) {
        self.socketPath = socketPath
        self.reconnectTimeout = reconnectTimeout
    }

    deinit { state.withLock { $0.connection }?.close() }

    /// Connects to foliod at `path`, or at `defaultSocketPath`. Throws `cannotConnect` at once if no
    /// daemon answers there.
    public static func connect(_ path: String? = nil, reconnectTimeout: Duration = .seconds(10)) async throws -> Folio {
        let folio = Folio(socketPath: path ?? defaultSocketPath, reconnectTimeout: reconnectTimeout)
        _ = try await folio.connection(waiting: false)
        return folio
    }

    /// `FOLIO_SOCKET` when set and not empty; otherwise foliod's default (PROTOCOL.md §1): for root
    /// `/run/folio/folio.sock`, for other users `$XDG_RUNTIME_DIR/folio/folio.sock` (or
    /// `/tmp/folio-$UID/folio.sock`) when it exists, else the system socket.
    public static var defaultSocketPath: String {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["FOLIO_SOCKET"], !path.isEmpty { return path }
        let system = "/run/folio/folio.sock"
        let uid = getuid()
        if uid == 0 { return system }
        let user: String
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            user = runtime + "/folio/folio.sock"
        } else {
            user = "/tmp/folio-\(uid)/folio.sock"
        }
        if FileManager.default.fileExists(atPath: user) || !FileManager.default.fileExists(atPath: system) {
            return user
        }
        return system
    }

    /// Closes the connection. Requests in flight fail with `FolioError.closed`, as do later ones.
    public func close() {
        let connection = state.withLock { state in
            state.isClosed = true
            defer { state.connection = nil }
            return state.connection
        }
        connection?.close()
    }

    /// The server's identity and limits (`hello`).
    public func hello(isolation: isolated (any Actor)? = #isolation) async throws -> ServerInfo {
        try RecordDecoder.decode(ServerInfo.self, from: try await request(["op": "hello"]))
    }

    /// The live connection, or a new one. With `waiting`, or when a connection was lost (foliod
    /// restarting: the next request waits for it, as the type's documentation says), retries until
    /// `reconnectTimeout` passes.
    func connection(waiting: Bool, isolation: isolated (any Actor)? = #isolation) async throws -> Connection {
        let deadline = ContinuousClock.now + reconnectTimeout
        while true {
            let current: Connection? = try state.withLock { state in
                if state.isClosed { throw FolioError.closed }
                return state.connection
            }
            if let current, current.isAlive { return current }
            do {
                let fresh = try Connection(path: socketPath)
                do {
                    try await fresh.learnLimits()
                } catch {
                    fresh.close()
                    throw error
                }
                let (chosen, closed) = state.withLock { state -> (Connection, Bool) in
                    if state.isClosed { return (fresh, true) }
                    if let other = state.connection, other !== current, other.isAlive { return (other, false) }
                    state.connection = fresh
                    return (fresh, false)
                }
                if closed {
                    fresh.close()
                    throw FolioError.closed
                }
                if chosen !== fresh { fresh.close() }
                return chosen
            } catch let error as FolioError {
                guard waiting || current != nil, ContinuousClock.now < deadline else { throw error }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    /// Sends one request and returns its `result`, or throws its error. The request is sent again,
    /// on a new connection, if the connection drops before the answer, for as long as
    /// `reconnectTimeout` from the first drop: a daemon that was killed may take a new connection
    /// on its way out and drop that one too. `retry: false` (ops that cannot be replayed) throws
    /// `connectionLost` instead. A write gets a `requestKey` for that, so it is applied once.
    func request(_ request: JSONObject, retry: Bool = true, isolation: isolated (any Actor)? = #isolation) async throws
        -> JSON
    {
        var request = request
        if retry, Self.keyedWrites.contains(request["op"]?.stringValue ?? ""), request["requestKey"] == nil {
            request["requestKey"] = .string(UUID().uuidString)
        }
        var lostAt: ContinuousClock.Instant?
        while true {
            let connection = try await connection(waiting: lostAt != nil)
            do {
                return try Self.result(of: try await connection.send(request, tag: connection.makeTag()))
            } catch let error as Connection.NotSent {
                // A connection found dead when writing (foliod restarted while it was idle).
                if let lostAt, ContinuousClock.now - lostAt > reconnectTimeout { throw error.reason }
                lostAt = lostAt ?? .now
            } catch FolioError.connectionLost(let reason) {
                guard retry else { throw FolioError.connectionLost(reason) }
                if let lostAt, ContinuousClock.now - lostAt > reconnectTimeout {
                    throw FolioError.connectionLost(reason)
                }
                lostAt = lostAt ?? .now
            }
        }
    }

    /// The ops that take a `requestKey` (PROTOCOL.md §5.19).
    private static let keyedWrites: Set<String> = ["create", "update", "delete", "batch"]

    /// The `result` of an answer, or its error.
    static func result(of envelope: JSONObject) throws -> JSON {
        if envelope["ok"] == .bool(true) { return envelope["result"] ?? .null }
        if case .object(let error)? = envelope["error"] { throw FolioError(serverError: error) }
        throw FolioError.decoding("an answer without ok or error: \(JSON.object(envelope))")
    }
}

/// What `hello` tells about the server.
public struct ServerInfo: Codable, Sendable {
    public var server: String
    public var version: String
    public var `protocol`: Int
    /// The longest request line accepted, in bytes.
    public var maxLine: Int
    public var durability: String
    public var lastSeq: Int
    public var uid: Int?
    public var role: String?
}
