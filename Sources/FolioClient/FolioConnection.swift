import CFolioSystem
import FolioJSON
import Glibc

/// A blocking client connection to `foliod`: send request lines, read response lines.
public final class FolioConnection {
    public let path: String
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var bufferStart = 0
    private var chunk = [UInt8](repeating: 0, count: 1 << 16)
    private var isClosed = false
    /// Descriptors the daemon passed with its answers (`file.read {fd: true}`), oldest first.
    private var passedDescriptors: [Int32] = []

    /// Connects to the socket at `path`. With a `timeout` (seconds), every send and receive that
    /// waits longer throws `ClientError.timedOut`, so a daemon that stops answering cannot hang the caller.
    public init(path: String, timeout: Double? = nil) throws(ClientError) {
        self.path = path
        fd = folio_unix_socket(0)
        guard fd >= 0 else { throw ClientError.system("socket", errno) }
        if let timeout {
            var limit = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        }
        if folio_unix_connect(fd, path) != 0 {
            let code = errno
            // The throw releases the object, whose deinit closes the socket (closing it here too
            // would close another thread's descriptor that reused the number).
            switch code {
            case ENOENT, ECONNREFUSED: throw ClientError.notRunning(path)
            default: throw ClientError.system("connect \(path)", code)
            }
        }
    }

    deinit { close() }

    /// Runs `body` with the socket's descriptor (to read its peer's credentials, say); the
    /// connection keeps it.
    public func withDescriptor<R>(_ body: (Int32) throws -> R) rethrows -> R { try body(fd) }

    public func close() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(fd)
        for descriptor in passedDescriptors { Glibc.close(descriptor) }
        passedDescriptors = []
    }

    /// Sends one request line with an open descriptor passed along (SCM_RIGHTS), as
    /// `file.put {fd: true}` wants: the daemon gets its own copy; the caller's stays open.
    public func send(_ request: JSON, passing descriptor: Int32) throws(ClientError) {
        var bytes = request.serialized()
        bytes.append(0x0A)
        var sent = 0
        while sent == 0 {
            let count = bytes.withUnsafeBytes { folio_send_with_fd(fd, $0.baseAddress, $0.count, descriptor, 0) }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw ClientError.timedOut("sendmsg") }
                throw ClientError.system("sendmsg", errno)
            }
            sent = count
        }
        if sent < bytes.count { try send(bytes: Array(bytes[sent...])) }
    }

    /// The oldest descriptor the daemon passed and the caller has not taken: the caller owns it.
    public func takePassedDescriptor() -> Int32? {
        passedDescriptors.isEmpty ? nil : passedDescriptors.removeFirst()
    }

    /// Writes raw bytes (whole request lines, newline included).
    public func send(bytes: [UInt8]) throws(ClientError) {
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw ClientError.timedOut("send") }
                throw ClientError.system("send", errno)
            }
            sent += count
        }
    }

    /// Sends one request as a line.
    public func send(_ request: JSON) throws(ClientError) {
        var bytes = request.serialized()
        bytes.append(0x0A)
        try send(bytes: bytes)
    }

    /// Ends the sending side (`shutdown(SHUT_WR)`); answers can still be read.
    public func finishSending() {
        shutdown(fd, Int32(SHUT_WR))
    }

    /// The next line without its newline; nil at end of stream.
    public func readLine() throws(ClientError) -> [UInt8]? {
        while true {
            let newline: Int? = buffer.withUnsafeBytes { bytes in
                guard bufferStart < bytes.count,
                    let found = memchr(bytes.baseAddress! + bufferStart, 0x0A, bytes.count - bufferStart)
                else {
                    return nil
                }
                return UnsafeRawPointer(found) - bytes.baseAddress!
            }
            if let newline {
                let line = Array(buffer[bufferStart..<newline])
                bufferStart = newline + 1
                if bufferStart > 1 << 16 {
                    buffer.removeFirst(bufferStart)
                    bufferStart = 0
                }
                return line
            }
            var passed: (Int32, Int32, Int32, Int32) = (-1, -1, -1, -1)
            var passedCount: Int32 = 0
            let count = chunk.withUnsafeMutableBytes { buffer in
                withUnsafeMutableBytes(of: &passed) {
                    folio_recv_with_fds(
                        fd, buffer.baseAddress, buffer.count, $0.baseAddress!.assumingMemoryBound(to: Int32.self), 4,
                        &passedCount)
                }
            }
            if passedCount > 0 {
                passedDescriptors += withUnsafeBytes(of: passed) {
                    Array($0.bindMemory(to: Int32.self).prefix(Int(passedCount)))
                }
            }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw ClientError.timedOut("recv") }
                throw ClientError.system("recv", errno)
            }
            if count == 0 {
                if bufferStart < buffer.count {
                    let line = Array(buffer[bufferStart...])
                    buffer = []
                    bufferStart = 0
                    return line
                }
                return nil
            }
            buffer.append(contentsOf: chunk[..<count])
        }
    }

    /// The next line parsed as JSON; nil at end of stream.
    public func readJSON() throws(ClientError) -> JSON? {
        guard let line = try readLine() else { return nil }
        do { return try JSONParser.parse(line) } catch { throw ClientError.malformedResponse("\(error)") }
    }

    /// Sends one request and returns its response line, parsed.
    /// When the daemon closed the connection before the request could go out (it refused the
    /// connection: no role, too many connections), its parting line is the answer.
    public func request(_ request: JSON) throws(ClientError) -> JSON {
        do {
            try send(request)
        } catch .system(let call, let code) where code == EPIPE || code == ECONNRESET {
            guard let parting = try? readJSON() else { throw ClientError.system(call, code) }
            return parting
        }
        guard let response = try readJSON() else { throw ClientError.closed }
        return response
    }
}

public enum ClientError: Error, CustomStringConvertible {
    case notRunning(String)
    case system(String, Int32)
    case closed
    case malformedResponse(String)
    /// A send or receive waited longer than the connection's timeout.
    case timedOut(String)

    public var description: String {
        switch self {
        case .notRunning(let path):
            return
                "foliod is not running (no daemon answers on \(path)); start it with `foliod` (or `make run`, or `systemctl start foliod`)"
        case .system(let call, let code): return "\(call): \(String(cString: strerror(code)))"
        case .closed: return "foliod closed the connection"
        case .malformedResponse(let detail): return "foliod sent a malformed response: \(detail)"
        case .timedOut(let call): return "\(call): foliod did not answer within the timeout"
        }
    }
}
