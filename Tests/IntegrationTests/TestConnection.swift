import CFolioSystem
import FolioJSON
import Foundation
import Glibc

/// A client connection for tests: like `FolioClient.FolioConnection`, but every send and receive
/// gives up after `timeout` seconds, so a daemon that stops answering fails a test instead of hanging
/// it, and raw bytes, readiness and end of stream are visible.
final class TestConnection {
    struct Failure: Error, CustomStringConvertible {
        let description: String
        /// The errno behind the failure, if a system call failed.
        var code: Int32 = 0
    }

    let path: String
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var isClosed = false
    /// This connection's number in the wire log, when there is one (`WireLog`).
    private let wireLogConnection = WireLog.shared?.connection()

    init(path: String, timeout: Double = 30) throws {
        self.path = path
        fd = folio_unix_socket(0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))", code: errno) }
        var limit = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        if folio_unix_connect(fd, path) != 0 {
            let code = errno
            // The throw releases the object and deinit closes the socket: closing it here as well
            // would close whatever descriptor another thread opened under the same number meanwhile.
            throw Failure(description: "connect \(path): \(String(cString: strerror(code)))", code: code)
        }
    }

    deinit { close() }

    /// Runs `body` with the socket, to set an option on it.
    func withDescriptor<R>(_ body: (Int32) -> R) -> R { body(fd) }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(fd)
    }

    // MARK: Sending

    /// Writes all of `bytes`; throws on a timeout or when the daemon closed the connection (EPIPE).
    func send(bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            }
            if count < 0 {
                let code = errno
                if code == EINTR { continue }
                throw Failure(description: "send: \(String(cString: strerror(code)))", code: code)
            }
            if let wireLogConnection { WireLog.shared?.record(wireLogConnection, sent: bytes[sent..<sent + count]) }
            sent += count
        }
    }

    func send(line: String) throws { try send(bytes: Array(line.utf8) + [0x0A]) }

    func send(_ request: JSON) throws { try send(bytes: request.serialized() + [0x0A]) }

    // MARK: Receiving

    /// The next line without its newline; nil at end of stream. A reset by the peer (it closed with
    /// bytes of ours unread) also counts as the end of the stream.
    func readLine() throws -> [UInt8]? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                if let wireLogConnection { WireLog.shared?.record(wireLogConnection, received: line) }
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            let count = chunk.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 {
                let code = errno
                if code == EINTR { continue }
                if code == ECONNRESET { return try endOfStream() }
                if code == EAGAIN || code == EWOULDBLOCK {
                    throw Failure(
                        description:
                            "no answer from foliod within the timeout (\(buffer.count) bytes of a partial line)",
                        code: code)
                }
                throw Failure(description: "recv: \(String(cString: strerror(code)))", code: code)
            }
            if count == 0 { return try endOfStream() }
            buffer.append(contentsOf: chunk[..<count])
        }
    }

    private func endOfStream() throws -> [UInt8]? {
        guard buffer.isEmpty else {
            throw Failure(
                description: "the stream ended inside a line: \(String(decoding: buffer, as: UTF8.self).prefix(200))")
        }
        return nil
    }

    /// The next line parsed as JSON; nil at end of stream.
    func readJSON() throws -> JSON? {
        guard let line = try readLine() else { return nil }
        do {
            return try JSONParser.parse(line)
        } catch {
            throw Failure(
                description: "malformed response line (\(error)): \(String(decoding: line, as: UTF8.self).prefix(300))")
        }
    }

    /// The next response; throws if the stream ended instead.
    func readResponse() throws -> JSON {
        guard let response = try readJSON() else {
            throw Failure(description: "foliod closed the connection instead of answering")
        }
        return response
    }

    /// Sends one request and returns its response.
    func request(_ request: JSON) throws -> JSON {
        try send(request)
        return try readResponse()
    }

    /// Whether something (a line or the end of the stream) can be read within `timeout` seconds.
    func waitReadable(timeout: Double) -> Bool {
        if !buffer.isEmpty { return true }
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let remaining = max(0, deadline.timeIntervalSinceNow)
            let ready = poll(&entry, 1, Int32(remaining * 1000))
            if ready > 0 { return true }
            if ready == 0 { return false }
            if errno != EINTR { return true }
        }
    }
}
