import CFolioSystem
import FolioJSON
import Foundation
import Glibc
import Synchronization

/// One socket to foliod, shared by every task of a `Folio`.
///
/// Each request line carries an integer tag of this connection. A reader thread splits the answers
/// into lines and hands each to whoever waits for its tag: the continuation of a request, or the
/// stream of a watch (whose tag marks its first answer, then its change lines). Writes are
/// serialized by a lock, so lines never interleave; any number of requests may be in flight.
/// When the socket breaks, every waiter gets `connectionLost` and the connection stays dead:
/// `Folio` opens a new one.
final class Connection: Sendable {
    /// What a stream (a watch) receives: its lines, then one `ended` when the connection is gone.
    enum StreamEvent: Sendable {
        case line(JSONObject)
        case ended(FolioError)
    }
    typealias StreamHandler = @Sendable (StreamEvent) -> Void

    private struct State {
        var pending: [Int64: CheckedContinuation<JSONObject, any Error>] = [:]
        var streams: [Int64: StreamHandler] = [:]
        var failure: FolioError?
        var nextTag: Int64 = 1
    }

    private let fd: Int32
    private let state = Mutex(State())
    /// Held while a line is written; true once the descriptor is closed (so no write can reach a
    /// descriptor number reused by someone else).
    private let writeLock = Mutex(false)

    /// Connects to the socket at `path` (socket, connect) and starts the reader thread.
    init(path: String) throws(FolioError) {
        let fd = folio_unix_socket(0)
        guard fd >= 0 else { throw .cannotConnect(path: path, reason: "socket: \(Self.describe(errno))") }
        if folio_unix_connect(fd, path) != 0 {
            let code = errno
            Glibc.close(fd)
            throw .cannotConnect(path: path, reason: Self.describe(code))
        }
        self.fd = fd
        let thread = Thread { [self] in
            folio_set_thread_name("foliokit-reader")
            readLines()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }

    var isAlive: Bool { state.withLock { $0.failure == nil } }

    /// A tag no other request or watch of this connection uses.
    func makeTag() -> Int64 {
        state.withLock { state in
            defer { state.nextTag += 1 }
            return state.nextTag
        }
    }

    /// Sends `request` with `tag` and waits for its answer (the whole envelope). With a `stream`,
    /// the lines with the same tag that follow the answer go to it (a watch); `removeStream` ends that.
    func send(_ request: JSONObject, tag: Int64, stream: StreamHandler? = nil) async throws -> JSONObject {
        var line: [UInt8] = [UInt8(ascii: "{")]
        line.append(contentsOf: #""tag":"#.utf8)
        line.append(contentsOf: String(tag).utf8)
        let body = request.serialized()
        if body.count > 2 {
            line.append(UInt8(ascii: ","))
            line.append(contentsOf: body[1...])
        } else {
            line.append(UInt8(ascii: "}"))
        }
        line.append(0x0A)
        return try await withCheckedThrowingContinuation { continuation in
            let failure: FolioError? = state.withLock { state in
                if let failure = state.failure { return failure }
                state.pending[tag] = continuation
                if let stream { state.streams[tag] = stream }
                return nil
            }
            if let failure {
                continuation.resume(throwing: failure)
                return
            }
            if let error = write(line) {
                // The reader fails whatever else waits once it sees the socket shut.
                shutdown()
                let waiting = state.withLock { state in
                    state.streams[tag] = nil
                    return state.pending.removeValue(forKey: tag)
                }
                waiting?.resume(throwing: error)
            }
        }
    }

    /// Stops routing lines with `tag` to its stream (after an unwatch, or when its consumer left).
    func removeStream(_ tag: Int64) {
        _ = state.withLock { $0.streams.removeValue(forKey: tag) }
    }

    /// Shuts the socket down; the reader thread then fails every waiter with `error` and closes it.
    func close(because error: FolioError = .closed) {
        state.withLock { state in
            if state.failure == nil { state.failure = error }
        }
        shutdown()
    }

    private func shutdown() {
        writeLock.withLock { closed in
            if !closed { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    /// Writes all of `line`, or says why it could not.
    private func write(_ line: [UInt8]) -> FolioError? {
        writeLock.withLock { closed -> FolioError? in
            if closed { return .connectionLost("the connection is closed") }
            var sent = 0
            while sent < line.count {
                let count = line.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, line.count - sent, Int32(MSG_NOSIGNAL)) }
                if count < 0 {
                    if errno == EINTR { continue }
                    return .connectionLost("send: \(Self.describe(errno))")
                }
                sent += count
            }
            return nil
        }
    }

    /// The reader thread: reads until the socket ends, routing each line.
    private func readLines() {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(1 << 16)
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var untaggedError: FolioError?
        var reason: FolioError = .connectionLost("foliod closed the connection")
        reading: while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                reason = .connectionLost("read: \(Self.describe(errno))")
                break
            }
            if count == 0 { break }
            let scanFrom = buffer.count
            buffer.append(contentsOf: chunk[0..<count])
            var lineStart = 0
            var index = scanFrom
            buffer.withUnsafeBytes { bytes in
                while index < bytes.count {
                    guard let found = memchr(bytes.baseAddress! + index, 0x0A, bytes.count - index) else { break }
                    let end = UnsafeRawPointer(found) - bytes.baseAddress!
                    if let error = route(UnsafeRawBufferPointer(rebasing: bytes[lineStart..<end])) { untaggedError = error }
                    lineStart = end + 1
                    index = lineStart
                }
            }
            if lineStart > 0 { buffer.removeFirst(lineStart) }
        }
        // A line without a tag (too_large, an idle timeout, a refused connection) says why foliod closed.
        if let untaggedError { reason = .connectionLost(untaggedError.description) }
        let (pending, streams, failure) = state.withLock { state in
            if state.failure == nil { state.failure = reason }
            defer {
                state.pending = [:]
                state.streams = [:]
            }
            return (state.pending, state.streams, state.failure!)
        }
        writeLock.withLock { closed in
            closed = true
            Glibc.close(fd)
        }
        for continuation in pending.values { continuation.resume(throwing: failure) }
        for stream in streams.values { stream(.ended(failure)) }
    }

    /// Hands one line to its waiter; returns the error of a line without a tag.
    private func route(_ line: UnsafeRawBufferPointer) -> FolioError? {
        guard let value = try? JSONParser.parse(line), case .object(let object) = value else { return nil }
        guard let tag = object["tag"]?.integerValue else {
            if case .object(let error)? = object["error"] { return FolioError(serverError: error) }
            return nil
        }
        enum Waiter {
            case request(CheckedContinuation<JSONObject, any Error>)
            case stream(StreamHandler)
        }
        let waiter: Waiter? = state.withLock { state in
            if let continuation = state.pending.removeValue(forKey: tag) { return .request(continuation) }
            guard let stream = state.streams[tag] else { return nil }
            // An error line ends a watch (lagging, a dropped view): nothing follows it.
            if object["ok"] != nil { state.streams[tag] = nil }
            return .stream(stream)
        }
        switch waiter {
        case .request(let continuation): continuation.resume(returning: object)
        case .stream(let stream): stream(.line(object))
        case nil: break
        }
        return nil
    }

    static func describe(_ code: Int32) -> String { String(cString: strerror(code)) }
}
