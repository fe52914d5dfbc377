import FolioClient
import FolioHarness
import Foundation

/// Sends `count` request lines over several pipelining connections (line k from `line(k)`),
/// failing on the first answer that is not ok.
struct PipelinedLoader {
    let socket: String
    let count: Int
    let connections: Int
    let line: @Sendable (Int) -> String

    func load() throws {
        let failures = Locked<[String]>([])
        let group = DispatchGroup()
        let (socket, count, connections, line) = (socket, count, connections, line)
        for part in 0..<connections {
            group.enter()
            Thread {
                defer { group.leave() }
                do {
                    let connection = try FolioConnection(path: socket)
                    var k = part
                    while k < count {
                        var lines: [UInt8] = []
                        var sent = 0
                        while k < count && sent < 500 {
                            lines += Array(line(k).utf8) + [0x0A]
                            sent += 1
                            k += connections
                        }
                        try connection.send(bytes: lines)
                        for _ in 0..<sent {
                            guard let response = try connection.readLine() else { throw BenchError.closed(socket) }
                            guard response.starts(with: Array(#"{"ok":true"#.utf8)) else {
                                throw BenchError.protocolViolation(String(decoding: response, as: UTF8.self))
                            }
                        }
                    }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }.start()
        }
        group.wait()
        if let failure = failures.withLock({ $0.first }) { throw BenchError.setup("loading: \(failure)") }
    }
}
