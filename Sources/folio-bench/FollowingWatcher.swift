import FolioHarness
import Glibc

/// A watcher that keeps up: it watches every event from `after` on a thread of its own, reads each
/// as it comes, and checks that sequences arrive in order without a gap or a repeat. A watch foliod
/// ends as `lagging` is resumed from its `lastSeq`, as the protocol says a client should.
final class FollowingWatcher: @unchecked Sendable {
    struct Counts {
        var events = 0
        var lastSeq: Int64 = 0
        var resumed = 0
        /// Events out of order, missing or repeated; the first such.
        var gaps = 0
        var firstGap: String?
        var failure: String?
    }

    private static let tag = "follow"
    private static let eventPrefix = Array(#"{"tag":"\#(tag)","event":{"seq":"#.utf8)
    private static let watchingPrefix = Array(#"{"tag":"\#(tag)","ok":true"#.utf8)
    private static let laggingMarker = Array(#""code":"lagging""#.utf8)

    private let counts = Locked(Counts())
    private let stopping = Locked(false)
    /// Used by the thread only once it runs.
    private let stream: SocketStream
    private var thread: ClientThread?

    init(socket: String, after: Int) throws {
        stream = try SocketStream(path: socket)
        try Self.watch(stream, after: Int64(after))
        counts.withLock { $0.lastSeq = Int64(after) }
        thread = ClientThread(name: "bench-watcher") { [self] in follow() }
    }

    var current: Counts { counts.withLock { $0 } }

    /// Ends the watch (closing the connection) and returns what was counted.
    func stop() -> Counts {
        stopping.withLock { $0 = true }
        // Wakes the thread from its wait for the next line.
        shutdown(stream.fd, Int32(SHUT_RDWR))
        thread?.join()
        thread = nil
        return current
    }

    private static func watch(_ stream: SocketStream, after: Int64) throws {
        try stream.send(Array(#"{"op":"watch","tag":"\#(tag)","after":\#(after)}"#.utf8) + [0x0A])
    }

    private func follow() {
        var expected = counts.withLock { $0.lastSeq } + 1
        while !stopping.withLock({ $0 }) {
            do {
                let resumeFrom: Int64? = try stream.withLine { line in
                    if line.starts(with: Self.eventPrefix) {
                        let sequence = WatchBenchmark.integer(after: Array(#""seq":"#.utf8), in: Array(line)) ?? -1
                        counts.withLock {
                            $0.events += 1
                            if sequence != expected {
                                $0.gaps += 1
                                $0.firstGap = $0.firstGap ?? "expected seq \(expected), got \(sequence)"
                            }
                            $0.lastSeq = sequence
                        }
                        expected = sequence + 1
                        return nil
                    }
                    if line.starts(with: Self.watchingPrefix) { return nil }
                    guard line.firstRange(of: Self.laggingMarker) != nil,
                        let last = WatchBenchmark.integer(after: Array(#""lastSeq":"#.utf8), in: Array(line))
                    else {
                        throw BenchError.protocolViolation(String(decoding: line, as: UTF8.self))
                    }
                    return last
                }
                if let resumeFrom {
                    counts.withLock { $0.resumed += 1 }
                    expected = resumeFrom + 1
                    try Self.watch(stream, after: resumeFrom)
                }
            } catch BenchError.stalled {
                continue  // no event for 30 s: nothing is being written
            } catch {
                if !stopping.withLock({ $0 }) { counts.withLock { $0.failure = "\(error)" } }
                return
            }
        }
    }
}
