import CFolioSystem
import FolioStore
import Foundation
import Glibc
import Synchronization

/// `--metrics-socket PATH`: a Unix socket that answers `GET /metrics` over HTTP/1.0 with the same
/// text as the `metrics` op, for a scraper or node_exporter's textfile. One request per
/// connection, one connection at a time, each given 5 s; the socket's file mode, as the main
/// socket's, says who may connect.
final class MetricsEndpoint: @unchecked Sendable {
    private let listener: UnixListener
    private let reads: ReadHandler
    private var reader: Store.Reader?
    private let log: Log
    private var thread: pthread_t?
    /// Set by `stop` before it closes the socket: only then does a failed accept end the thread.
    private let stopping = Atomic<Bool>(false)

    init(path: String, mode: mode_t, group: String?, reads: ReadHandler, store: Store, log: Log) throws {
        listener = try UnixListener(path: path, mode: mode, group: group, blocking: true)
        self.reads = reads
        reader = try store.makeReader()
        self.log = log
        thread = startThread(name: "folio-metrics") { [self] in serve() }
    }

    private func serve() {
        var failures = ThrottledNote()
        while true {
            let fd = accept(listener.fd, nil, nil)
            if fd < 0 {
                let error = errno
                if stopping.load(ordering: .acquiring) { return }  // closed at shutdown
                if error == EINTR || error == ECONNABORTED { continue }
                // No descriptor or kernel memory left, or the like: the endpoint waits, it does not end.
                if let count = failures.note(now: monotonicMilliseconds()) {
                    log.error(
                        "the metrics socket cannot accept (\(count) time(s)): \(SystemError("accept", errno: error)); trying again every 100 ms"
                    )
                }
                usleep(100_000)
                continue
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            answer(fd)
            close(fd)
        }
    }

    private func answer(_ fd: Int32) {
        var limit = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var request: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while request.count < 16384 {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            request += chunk[..<count]
            if request.count >= 4, request.suffix(4) == [13, 10, 13, 10] || request.suffix(2) == [10, 10] { break }
        }
        let firstLine = String(decoding: request.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self)
        let parts = firstLine.split(separator: " ")
        let status: String
        var body: String
        var type = "text/plain; charset=utf-8"
        if parts.count >= 2, parts[0] == "GET", parts[1] == "/metrics" {
            do {
                guard let reader else { throw CancellationError() }
                body = try reader.read { try reads.metricsText($0) }
                status = "200 OK"
                type = "text/plain; version=0.0.4; charset=utf-8"
            } catch {
                status = "500 Internal Server Error"
                body = "\(error)\n"
            }
        } else if parts.first.map({ $0 != "GET" }) ?? true {
            status = "405 Method Not Allowed"
            body = "only GET /metrics\n"
        } else {
            status = "404 Not Found"
            body = "only GET /metrics\n"
        }
        let response = Array(
            "HTTP/1.0 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
                .utf8)
        var sent = 0
        while sent < response.count {
            let count = response.withUnsafeBytes {
                send(fd, $0.baseAddress! + sent, response.count - sent, Int32(MSG_NOSIGNAL))
            }
            guard count > 0 else { return }
            sent += count
        }
    }

    func stop() {
        stopping.store(true, ordering: .releasing)
        shutdown(listener.fd, Int32(SHUT_RDWR))
        listener.close()
        if let thread { pthread_join(thread, nil) }
        thread = nil
        reader = nil  // before the store closes
    }
}
