import FolioHarness

/// Clients that each stream one request line longer than foliod's `maxLine` as fast as the socket
/// takes it (a `create` whose string never ends; every other client ends it with a newline at twice
/// the limit), read what foliod answers, and start again on a new connection. A thread each.
final class LongLineStreamers: @unchecked Sendable {
    struct Counts {
        var lines = 0
        /// Answered `too_large`, as foliod answers a line over the limit.
        var refusedTooLarge = 0
        /// Closed without that answer (foliod sheds the largest holders without a last line when
        /// its client memory budget is full).
        var closedWithoutAnswer = 0
        var otherAnswers = 0
        var firstOtherAnswer: String?
        var bytesSent = 0
    }

    private static let opening = Array(#"{"op":"create","collection":"Long","data":{"text":""#.utf8)
    private static let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 64 << 10)

    private let socket: String
    private let count: Int
    private let lineBytes: Int
    private let stopping = Locked(false)
    private let counts = Locked(Counts())
    private var threads: [ClientThread] = []

    /// `maxLine` as foliod's `hello` reports it: every line sent is twice as long.
    init(socket: String, count: Int, maxLine: Int) {
        self.socket = socket
        self.count = count
        lineBytes = 2 * maxLine
    }

    func start() {
        threads = (0..<count).map { index in
            ClientThread(name: "bench-long-\(index)") { [self] in stream(endsLines: index % 2 == 1) }
        }
    }

    func stop() -> Counts {
        stopping.withLock { $0 = true }
        for thread in threads { thread.join() }
        threads = []
        return counts.withLock { $0 }
    }

    private func stream(endsLines: Bool) {
        while !stopping.withLock({ $0 }) {
            guard let connection = try? SocketStream(path: socket) else { return }
            var sent = 0
            do {
                try connection.send(Self.opening)
                sent = Self.opening.count
                while sent < lineBytes && !stopping.withLock({ $0 }) {
                    try connection.send(Self.chunk)
                    sent += Self.chunk.count
                }
                if endsLines { try connection.send([0x0A]) }
            } catch {
                // foliod closed the connection while the line was still arriving: its answer may be waiting.
            }
            // Stopped half-way: foliod has nothing to answer yet.
            if sent < lineBytes && stopping.withLock({ $0 }) { return }
            let answer = try? connection.withLine { String(decoding: $0, as: UTF8.self) }
            counts.withLock {
                $0.lines += 1
                $0.bytesSent += sent
                switch answer {
                case nil: $0.closedWithoutAnswer += 1
                case let text? where text.contains(#""code":"too_large""#): $0.refusedTooLarge += 1
                case let text?:
                    $0.otherAnswers += 1
                    $0.firstOtherAnswer = $0.firstOtherAnswer ?? text
                }
            }
        }
    }
}
