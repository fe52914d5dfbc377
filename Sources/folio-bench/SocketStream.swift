import CFolioSystem
import Glibc

/// A blocking Unix-domain stream connection with its own read buffer, used by one thread at a time.
/// Lines and byte runs are handed out in place, valid only during the closure that receives them.
/// The buffer is allocated on the first read, so that a connection which only holds its place or
/// only sends (the storms open thousands) costs a descriptor and little else.
final class SocketStream {
    static let bufferCapacity = 256 << 10
    /// A daemon that does not answer within this long has stalled: the wait ends as a failure.
    static let replyTimeoutSeconds = 30

    let path: String
    /// For `poll` over many connections; the stream closes it.
    let fd: Int32
    private var storage: UnsafeMutableRawBufferPointer?
    /// First byte not yet consumed, and one past the last byte received.
    private var start = 0
    private var end = 0

    /// `socket` + `connect` (`folio_unix_connect`). `receiveBufferBytes` sets `SO_RCVBUF` first
    /// (a watcher that must fall behind quickly asks for a small one).
    init(path: String, receiveBufferBytes: Int32? = nil) throws {
        self.path = path
        fd = folio_unix_socket(0)
        guard fd >= 0 else { throw BenchError.system("socket", errno) }
        if var size = receiveBufferBytes {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        if folio_unix_connect(fd, path) != 0 {
            let code = errno
            Glibc.close(fd)
            throw BenchError.system("connect \(path)", code)
        }
        var timeout = timeval(tv_sec: Self.replyTimeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        Glibc.close(fd)
        storage?.deallocate()
    }

    private var buffer: UnsafeMutableRawBufferPointer {
        if let storage { return storage }
        let allocated = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.bufferCapacity, alignment: 16)
        storage = allocated
        return allocated
    }

    /// Sends what the socket takes now without waiting (`MSG_DONTWAIT`): how many bytes, 0 when
    /// its buffer is full. Throws once the daemon has closed the connection.
    func sendWithoutWaiting(_ bytes: UnsafeRawBufferPointer) throws -> Int {
        while true {
            let count = Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            if count >= 0 { return count }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return 0
            default: throw BenchError.system("send to \(path)", errno)
            }
        }
    }

    /// Writes all of `bytes` (`send` with `MSG_NOSIGNAL`, retried on `EINTR` and short writes).
    func send(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { raw in
            var sent = 0
            while sent < raw.count {
                let count = Glibc.send(fd, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
                if count < 0 {
                    if errno == EINTR { continue }
                    throw BenchError.system("send to \(path)", errno)
                }
                sent += count
            }
        }
    }

    /// The next line, without its `\n` or `\r\n`.
    func withLine<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) throws -> Result {
        var searchFrom = start
        while true {
            if searchFrom < end, let newline = memchr(buffer.baseAddress! + searchFrom, 0x0A, end - searchFrom) {
                let newlineOffset = UnsafeRawPointer(newline) - UnsafeRawPointer(buffer.baseAddress!)
                var lineEnd = newlineOffset
                if lineEnd > start && buffer[lineEnd - 1] == 0x0D { lineEnd -= 1 }
                let line = UnsafeRawBufferPointer(rebasing: buffer[start..<lineEnd])
                start = newlineOffset + 1
                return try body(line)
            }
            let scanned = end
            searchFrom = scanned - (try receiveMore())
        }
    }

    /// The next `count` bytes.
    func withBytes<Result>(count: Int, _ body: (UnsafeRawBufferPointer) throws -> Result) throws -> Result {
        guard count <= Self.bufferCapacity else {
            throw BenchError.protocolViolation("a reply of \(count) bytes is too large")
        }
        while end - start < count { _ = try receiveMore() }
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[start..<start + count])
        start += count
        return try body(bytes)
    }

    /// Receives at least one more byte, first moving unread bytes to the front if the buffer is
    /// full; returns how far they moved.
    private func receiveMore() throws -> Int {
        var shift = 0
        if end == buffer.count {
            guard start > 0 else {
                let head = String(decoding: UnsafeRawBufferPointer(rebasing: buffer[0..<min(end, 120)]), as: UTF8.self)
                throw BenchError.protocolViolation("a reply line longer than \(buffer.count) bytes: \(head)…")
            }
            shift = start
            memmove(buffer.baseAddress!, buffer.baseAddress! + start, end - start)
            end -= start
            start = 0
        } else if start == end {
            shift = start
            start = 0
            end = 0
        }
        while true {
            let count = recv(fd, buffer.baseAddress! + end, buffer.count - end, 0)
            if count > 0 {
                end += count
                return shift
            }
            if count == 0 { throw BenchError.closed(path) }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: throw BenchError.stalled(path, seconds: Self.replyTimeoutSeconds)
            default: throw BenchError.system("recv from \(path)", errno)
            }
        }
    }
}
