import FolioHarness
import Glibc

/// Clients that each send the start of a request line one byte at a time, one byte every
/// `byteInterval` seconds, and never its end. A connection foliod closes (it answers `bad_request`
/// once the line timeout passes) is replaced by a fresh one, as a persistent attacker would, so
/// `count` are open all the time. One thread drives them all.
final class Slowloris: @unchecked Sendable {
    struct Counts {
        /// Connections opened, the first `count` included.
        var opened = 0
        /// Closed by foliod with the line timeout's `bad_request`.
        var timedOut = 0
        /// Closed by foliod with another answer, or none.
        var closedOtherwise = 0
        var firstOtherAnswer: String?
        var bytesSent = 0
    }

    /// Every byte after this one is a letter of the tag that never ends.
    private static let opening = Array(#"{"op":"hello","tag":""#.utf8)

    private let socket: String
    private let count: Int
    private let byteInterval: UInt64
    private let stopping = Locked(false)
    private let counts = Locked(Counts())
    private var thread: ClientThread?
    /// Touched by `start` before the thread starts, then only by the thread.
    private var connections: [(stream: SocketStream, sent: Int, next: UInt64)] = []

    init(socket: String, count: Int, byteIntervalSeconds: Double) {
        self.socket = socket
        self.count = count
        byteInterval = MonotonicClock.nanoseconds(seconds: byteIntervalSeconds)
    }

    /// Connects all of them, then starts trickling.
    func start() throws {
        let now = MonotonicClock.now()
        for index in 0..<count {
            // Spread the first bytes over one interval, so the bytes arrive evenly.
            connections.append((try SocketStream(path: socket), 0, now + byteInterval * UInt64(index) / UInt64(count)))
        }
        counts.withLock { $0.opened = count }
        thread = ClientThread(name: "bench-slowloris") { [self] in trickle() }
    }

    /// Closes every connection; what happened to them.
    func stop() -> Counts {
        stopping.withLock { $0 = true }
        thread?.join()
        thread = nil
        return counts.withLock { $0 }
    }

    private func trickle() {
        defer { connections = [] }
        var polls = connections.map { pollfd(fd: $0.stream.fd, events: Int16(POLLIN), revents: 0) }
        while !stopping.withLock({ $0 }) {
            let now = MonotonicClock.now()
            var sent = 0
            for index in connections.indices where connections[index].next <= now && polls[index].fd >= 0 {
                let position = connections[index].sent
                let byte = position < Self.opening.count ? Self.opening[position] : UInt8(ascii: "x")
                let stream = connections[index].stream
                let taken = withUnsafeBytes(of: byte) { (try? stream.sendWithoutWaiting($0)) ?? 0 }
                connections[index].sent += taken
                sent += taken
                connections[index].next = now + byteInterval
            }
            // A connection foliod closed is readable: its last answer, then the end of the stream.
            _ = poll(&polls, nfds_t(polls.count), 0)
            var timedOut = 0
            var otherwise = 0
            var opened = 0
            var otherAnswer: String?
            for index in polls.indices where polls[index].revents != 0 {
                let answer =
                    (try? connections[index].stream.withLine { String(decoding: $0, as: UTF8.self) }) ?? "(no answer)"
                if answer.contains("no end of line within") {
                    timedOut += 1
                } else {
                    otherwise += 1
                    otherAnswer = otherAnswer ?? answer
                }
                guard let fresh = try? SocketStream(path: socket) else {
                    polls[index].fd = -1
                    continue
                }
                opened += 1
                connections[index] = (fresh, 0, now + byteInterval)
                polls[index] = pollfd(fd: fresh.fd, events: Int16(POLLIN), revents: 0)
            }
            counts.withLock {
                $0.bytesSent += sent
                $0.timedOut += timedOut
                $0.closedOtherwise += otherwise
                $0.opened += opened
                $0.firstOtherAnswer = $0.firstOtherAnswer ?? otherAnswer
            }
            MonotonicClock.sleep(until: now + 10_000_000)
        }
    }
}
