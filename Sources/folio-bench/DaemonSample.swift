import FolioClient
import FolioJSON

/// foliod's resources at one moment: resident memory and open descriptors from `/proc/PID`, and what
/// `stats` says it holds for its clients and in its LMDB environment.
struct DaemonSample {
    /// `MonotonicClock.now()` when `stats` answered.
    let at: UInt64
    let memory: ProcessMemory
    /// Entries of `/proc/PID/fd`.
    let descriptors: Int
    let connections: Int
    let connectionsRefused: Int
    let connectionsShed: Int
    let slowLinesClosed: Int
    /// Bytes foliod holds for clients: incomplete lines, queued answers, unanswered requests.
    let clientMemory: Int
    let watches: Int
    let lastSeq: Int
    let objects: Int
    let usedSize: Int
    let fileSize: Int
    let readerSlotsUsed: Int
    /// How long `stats` took to answer: it computes the state digest whenever anything was written
    /// since the last `stats`, a pass over the whole store.
    let statsNanoseconds: UInt64

    /// Asks `stats` over `control`, then reads `/proc/PID/status` and `/proc/PID/fd`: in this
    /// order, a sample that shows no connection but the caller's shows no descriptor of a
    /// connection that closed meanwhile either.
    static func take(pid: Int32, control: FolioConnection) throws -> DaemonSample {
        let asked = MonotonicClock.now()
        let response = try control.request(["op": "stats"])
        let answered = MonotonicClock.now()
        guard let memory = ProcessMemory.read(pid: pid), let descriptors = ProcFile.names(in: "/proc/\(pid)/fd")?.count
        else {
            throw BenchError.setup("foliod (pid \(pid)) is gone: no /proc/\(pid)/status")
        }
        guard response.objectValue?["ok"] == .bool(true), let stats = response.objectValue?["result"]?.objectValue,
            let lmdb = stats["lmdb"]?.objectValue
        else {
            throw BenchError.protocolViolation("stats answered \(response)")
        }
        func number(_ object: JSONObject, _ key: String) throws -> Int {
            guard let value = object[key]?.integerValue else {
                throw BenchError.protocolViolation("stats without \(key): \(response)")
            }
            return Int(value)
        }
        return DaemonSample(
            at: answered, memory: memory, descriptors: descriptors, connections: try number(stats, "connections"),
            connectionsRefused: try number(stats, "connectionsRefused"),
            connectionsShed: try number(stats, "connectionsShed"),
            slowLinesClosed: try number(stats, "slowLinesClosed"),
            clientMemory: try number(stats, "clientMemory"), watches: try number(stats, "watches"),
            lastSeq: try number(stats, "lastSeq"), objects: try number(stats, "objects"),
            usedSize: try number(lmdb, "usedSize"), fileSize: try number(lmdb, "fileSize"),
            readerSlotsUsed: try number(lmdb, "readerSlotsUsed"), statsNanoseconds: answered - asked)
    }
}

extension Array where Element == DaemonSample {
    /// The samples taken from `start` up to `end` (monotonic nanoseconds).
    func between(_ start: UInt64, _ end: UInt64) -> [DaemonSample] { filter { $0.at >= start && $0.at <= end } }

    func maximum(_ value: (DaemonSample) -> Int) -> Int { map(value).max() ?? 0 }
}
