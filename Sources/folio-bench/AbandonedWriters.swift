import FolioHarness

/// Clients that each send a burst of long but legal `create` lines (just under `maxLine`) and close
/// the connection at once, without waiting for an answer, then do it again on a new one: foliod
/// must still apply the writes (`PROTOCOL.md` §1), and hold them meanwhile. A thread each.
final class AbandonedWriters: @unchecked Sendable {
    static let linesPerConnection = 12

    private let socket: String
    private let count: Int
    private let burst: [UInt8]
    private let stopping = Locked(false)
    private let sent = Locked(0)
    private var threads: [ClientThread] = []

    /// `maxLine` as foliod's `hello` reports it: each line is 2 KiB shorter.
    init(socket: String, count: Int, maxLine: Int) {
        self.socket = socket
        self.count = count
        let opening = Array(#"{"op":"create","collection":"Abandoned","data":{"text":""#.utf8)
        let closing = Array(#""}}"#.utf8) + [0x0A]
        let line = opening + [UInt8](repeating: UInt8(ascii: "a"), count: maxLine - 2048) + closing
        burst = Array([[UInt8]](repeating: line, count: Self.linesPerConnection).joined())
    }

    func start() {
        threads = (0..<count).map { index in
            ClientThread(name: "bench-abandon-\(index)") { [self] in
                while !stopping.withLock({ $0 }) {
                    guard let connection = try? SocketStream(path: socket) else { return }
                    // foliod may close it first (over its client memory): what it took still counts.
                    if (try? connection.send(burst)) != nil { sent.withLock { $0 += Self.linesPerConnection } }
                }
            }
        }
    }

    /// Lines sent whole (each burst that the socket took entirely).
    var linesSent: Int { sent.withLock { $0 } }

    func stop() -> Int {
        stopping.withLock { $0 = true }
        for thread in threads { thread.join() }
        threads = []
        return linesSent
    }
}
