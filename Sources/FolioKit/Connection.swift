import CFolioSystem
import FolioJSON
import Foundation
import Glibc

/// One socket to foliod, shared by every task of a `Folio`.
///
/// Each request line carries an integer tag of this connection, and every line read is handed to
/// whoever waits for its tag: the continuation of a request, or the stream of a watch (whose tag
/// marks its first answer, then its change lines). Writes are serialized by a lock, so lines never
/// interleave; any number of requests may be in flight.
///
/// Who reads: one reader at a time holds the socket's read side (`reading`). A request sent while
/// nobody reads and no watch runs reads its own answer on its own thread (the leader), routing any
/// other lines it meets, for at most `leaderWait`: a `get` then costs what a blocking client pays,
/// one `read`, with no thread hop. Otherwise, or once the leader gives up, the reader thread reads
/// while requests wait or watches run, and resumes their continuations.
///
/// When the socket breaks, every waiter gets `connectionLost` and the connection stays dead:
/// `Folio` opens a new one.
final class Connection: @unchecked Sendable {
    /// What a stream (a watch) receives: its lines, then one `ended` when the connection is gone.
    enum StreamEvent: Sendable {
        case line(JSONObject)
        case ended(FolioError)
    }
    typealias StreamHandler = @Sendable (StreamEvent) -> Void

    private enum Reader {
        case nobody, leader, thread
    }

    /// How long a leader reads before it leaves its answer to the reader thread (`SO_RCVTIMEO`).
    private static let leaderWait = timeval(tv_sec: 0, tv_usec: 2000)

    private let fd: Int32

    /// Guards the fields up to `reading`; the reader thread waits on it for work.
    private let lock = NSCondition()
    private var pending: [Int64: CheckedContinuation<JSONObject, any Error>] = [:]
    private var streams: [Int64: StreamHandler] = [:]
    private var failure: FolioError?
    private var nextTag: Int64 = 1
    private var reading = Reader.nobody

    /// Touched only by the reader `reading` names (it changes hands under `lock`).
    private var buffer: [UInt8] = []
    private var bufferStart = 0
    private var chunk = [UInt8](repeating: 0, count: 1 << 16)
    private var untaggedError: FolioError?
    /// The server's `maxLine` once known (`hello`, asked when the connection is made): a longer
    /// request is refused here. Sent, foliod would answer `too_large` untagged and close the
    /// connection, every other request on it lost, and sent again it would do so again. Guarded
    /// by `lock`.
    private var maxLine = Int.max

    /// Held while a line is written. An `NSLock`, not a `Synchronization.Mutex`: on Linux that one
    /// is a futex ThreadSanitizer does not see, and `make test-tsan` took the reader thread's close
    /// and a `close()` from another thread, both under it, for a race.
    private let writeLock = NSLock()
    /// True once the descriptor is closed (so no write can reach a descriptor number reused by
    /// someone else). Guarded by `writeLock`.
    private var descriptorClosed = false

    /// Connects to the socket at `path` (socket, connect) and starts the reader thread.
    init(path: String) throws(FolioError) {
        let fd = folio_unix_socket(0)
        guard fd >= 0 else { throw .cannotConnect(path: path, reason: "socket: \(Self.describe(errno))") }
        if folio_unix_connect(fd, path) != 0 {
            let code = errno
            Glibc.close(fd)
            throw .cannotConnect(path: path, reason: Self.describe(code))
        }
        var wait = Self.leaderWait
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        self.fd = fd
        buffer.reserveCapacity(1 << 16)
        let thread = Thread { [self] in
            folio_set_thread_name("foliokit-reader")
            readWhileNeeded()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }

    var isAlive: Bool { lock.withLock { failure == nil } }

    /// A tag no other request or watch of this connection uses.
    func makeTag() -> Int64 {
        lock.withLock {
            defer { nextTag += 1 }
            return nextTag
        }
    }

    /// Asks the server its `maxLine` (`hello`), so that `send` refuses a longer line.
    func learnLimits(isolation: isolated (any Actor)? = #isolation) async throws {
        let answer = try await send(["op": "hello"], tag: makeTag())
        if let limit = answer["result"]?.objectValue?["maxLine"]?.integerValue {
            lock.withLock { maxLine = Int(limit) }
        }
    }

    /// Sends `request` with `tag` and waits for its answer (the whole envelope). With a `stream`,
    /// the lines with the same tag that follow the answer go to it (a watch); `removeStream` ends that.
    func send(
        _ request: JSONObject, tag: Int64, stream: StreamHandler? = nil, isolation: isolated (any Actor)? = #isolation
    ) async throws -> JSONObject {
        let line = Self.line(request, tag: tag)
        let leads: Bool = try lock.withLock {
            if let failure { throw failure }
            if line.count - 1 > maxLine {
                throw FolioError.tooLarge(
                    "the request's line would be \(line.count - 1) bytes, over the server's maxLine of \(maxLine)")
            }
            if let stream { streams[tag] = stream }
            guard reading == .nobody, streams.isEmpty else { return false }
            reading = .leader
            return true
        }
        if leads {
            if let error = write(line) {
                _ = fail(error)
                shutdown()
                releaseReading()
                throw NotSent(reason: error)
            }
            if let answer = try lead(until: tag) { return answer }
        }
        return try await withCheckedThrowingContinuation { continuation in
            let refusal: FolioError? = lock.withLock {
                if let failure { return failure }
                pending[tag] = continuation
                // The leader that gave up hands reading over; a new waiter wakes an idle reader thread.
                if leads { reading = .nobody }
                if reading == .nobody { lock.signal() }
                return nil
            }
            if let refusal {
                if leads { releaseReading() }
                continuation.resume(throwing: refusal)
                return
            }
            if !leads, let error = write(line) {
                // Fails every other waiter; this one was never sent.
                let waiting = lock.withLock {
                    streams[tag] = nil
                    return pending.removeValue(forKey: tag)
                }
                _ = fail(error)
                shutdown()
                waiting?.resume(throwing: NotSent(reason: error))
            }
        }
    }

    /// A request whose line could not be written: the server never saw it, so sending it again
    /// on a new connection is always safe.
    struct NotSent: Error {
        let reason: FolioError
    }

    /// Stops routing lines with `tag` to its stream (after an unwatch, or when its consumer left).
    func removeStream(_ tag: Int64) {
        _ = lock.withLock { streams.removeValue(forKey: tag) }
    }

    /// Shuts the socket down: whoever reads then fails every waiter with `error`, and the reader
    /// thread closes the descriptor.
    func close(because error: FolioError = .closed) {
        lock.withLock {
            if failure == nil { failure = error }
            lock.signal()
        }
        shutdown()
    }

    private func shutdown() {
        writeLock.withLock {
            if !descriptorClosed { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    /// `{"tag":N,` + the request's fields + `}\n`.
    private static func line(_ request: JSONObject, tag: Int64) -> [UInt8] {
        let body = request.serialized()
        var line: [UInt8] = []
        line.reserveCapacity(body.count + 24)
        line.append(contentsOf: #"{"tag":"#.utf8)
        line.append(contentsOf: String(tag).utf8)
        if body.count > 2 {
            line.append(UInt8(ascii: ","))
            line.append(contentsOf: body[1...])
        } else {
            line.append(UInt8(ascii: "}"))
        }
        line.append(0x0A)
        return line
    }

    /// Writes all of `line`, or says why it could not.
    private func write(_ line: [UInt8]) -> FolioError? {
        writeLock.withLock { () -> FolioError? in
            if descriptorClosed { return .connectionLost("the connection is closed") }
            var sent = 0
            while sent < line.count {
                let count = line.withUnsafeBytes {
                    Glibc.send(fd, $0.baseAddress! + sent, line.count - sent, Int32(MSG_NOSIGNAL))
                }
                if count < 0 {
                    if errno == EINTR { continue }
                    return .connectionLost("send: \(Self.describe(errno))")
                }
                sent += count
            }
            return nil
        }
    }

    /// The leader's read: lines until the one tagged `tag` (returned, reading released), routing
    /// the others. Nil if nothing came for `leaderWait`: the caller still reads and must hand over.
    private func lead(until tag: Int64) throws(FolioError) -> JSONObject? {
        while true {
            if let answer = routeLines(lookingFor: tag) {
                releaseReading()
                return answer
            }
            switch readChunk() {
            case .data: continue
            case .timedOut: return nil
            case .ended(let reason):
                let failure = fail(reason)
                releaseReading()
                throw failure
            }
        }
    }

    /// Gives up reading; wakes the reader thread if someone still needs it.
    private func releaseReading() {
        lock.withLock {
            reading = .nobody
            if !pending.isEmpty || !streams.isEmpty || failure != nil { lock.signal() }
        }
    }

    /// The reader thread: reads while requests wait or watches run and no leader reads; closes the
    /// descriptor once the connection has failed.
    private func readWhileNeeded() {
        lock.lock()
        while true {
            if failure != nil, reading == .nobody { break }
            guard failure == nil, reading == .nobody, !pending.isEmpty || !streams.isEmpty else {
                lock.wait()
                continue
            }
            reading = .thread
            lock.unlock()
            _ = routeLines(lookingFor: nil)
            var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&ready, 1, -1) >= 0 {
                switch readChunk() {
                case .data, .timedOut: _ = routeLines(lookingFor: nil)
                case .ended(let reason): _ = fail(reason)
                }
            } else if errno != EINTR {
                _ = fail(.connectionLost("poll: \(Self.describe(errno))"))
            }
            lock.lock()
            reading = .nobody
        }
        lock.unlock()
        writeLock.withLock {
            descriptorClosed = true
            Glibc.close(fd)
        }
    }

    private enum ReadResult {
        case data, timedOut
        case ended(FolioError)
    }

    /// One `read`, appended to the buffer.
    private func readChunk() -> ReadResult {
        if bufferStart > 0, bufferStart == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            bufferStart = 0
        } else if bufferStart > 1 << 16 {
            buffer.removeFirst(bufferStart)
            bufferStart = 0
        }
        while true {
            let received = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if received > 0 {
                buffer.append(contentsOf: chunk[0..<received])
                return .data
            }
            if received == 0 {
                let reason =
                    untaggedError.map { "foliod closed the connection: \($0)" } ?? "foliod closed the connection"
                return .ended(.connectionLost(reason))
            }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .timedOut
            default: return .ended(.connectionLost("read: \(Self.describe(errno))"))
            }
        }
    }

    /// Routes every complete line of the buffer (none may wait there once its reader lets go);
    /// returns the one tagged `tag`.
    private func routeLines(lookingFor tag: Int64?) -> JSONObject? {
        var answer: JSONObject?
        var deliveries: [(Waiter, JSONObject)] = []
        buffer.withUnsafeBytes { bytes in
            while bufferStart < bytes.count,
                let found = memchr(bytes.baseAddress! + bufferStart, 0x0A, bytes.count - bufferStart)
            {
                let end = UnsafeRawPointer(found) - bytes.baseAddress!
                let line = UnsafeRawBufferPointer(rebasing: bytes[bufferStart..<end])
                bufferStart = end + 1
                guard let value = try? JSONParser.parse(line), case .object(let object) = value else { continue }
                guard let lineTag = object["tag"]?.integerValue else {
                    // A line without a tag (too_large, an idle timeout, a refused connection) says
                    // why foliod is closing the connection.
                    if case .object(let error)? = object["error"] { untaggedError = FolioError(serverError: error) }
                    continue
                }
                if lineTag == tag {
                    answer = object
                } else if let waiter = waiter(for: lineTag, object) {
                    deliveries.append((waiter, object))
                }
            }
        }
        for (waiter, object) in deliveries {
            switch waiter {
            case .request(let continuation): continuation.resume(returning: object)
            case .stream(let stream): stream(.line(object))
            }
        }
        return answer
    }

    private enum Waiter {
        case request(CheckedContinuation<JSONObject, any Error>)
        case stream(StreamHandler)
    }

    private func waiter(for tag: Int64, _ object: JSONObject) -> Waiter? {
        lock.withLock {
            if let continuation = pending.removeValue(forKey: tag) { return .request(continuation) }
            guard let stream = streams[tag] else { return nil }
            // An error line ends a watch (lagging, a dropped view): nothing follows it.
            if object["ok"] != nil { streams[tag] = nil }
            return .stream(stream)
        }
    }

    /// Marks the connection failed and fails every waiter; returns the failure (the first reason
    /// given, e.g. `closed`).
    private func fail(_ reason: FolioError) -> FolioError {
        let (waiting, watching, error) = lock.withLock {
            () -> ([Int64: CheckedContinuation<JSONObject, any Error>], [Int64: StreamHandler], FolioError) in
            if self.failure == nil { self.failure = reason }
            defer {
                pending = [:]
                streams = [:]
                lock.signal()
            }
            return (pending, streams, self.failure!)
        }
        for continuation in waiting.values { continuation.resume(throwing: error) }
        for stream in watching.values { stream(.ended(error)) }
        return error
    }

    static func describe(_ code: Int32) -> String { String(cString: strerror(code)) }
}
