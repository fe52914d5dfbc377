import Foundation
import Glibc

/// With `FOLIO_WIRE_LOG` set to a directory, every line a `TestConnection` sends and receives,
/// appended to one file per test process, `wire-<pid>.log`, for `proto/check/protocol_check.py
/// validate-log` to check against proto/schema. One record a line: `<connection>> <base64 of the
/// bytes sent>` (a test may send any bytes, partial lines included) or `<connection>< <line received>`.
/// Each record is one `write(2)` under a lock, so threads and connections do not mix their lines.
final class WireLog: @unchecked Sendable {
    /// nil, and nothing recorded, when `FOLIO_WIRE_LOG` is unset or empty.
    static let shared: WireLog? = {
        let directory = ProcessInfo.processInfo.environment["FOLIO_WIRE_LOG"] ?? ""
        guard !directory.isEmpty else { return nil }
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let descriptor = open(directory + "/wire-\(getpid()).log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        return descriptor < 0 ? nil : WireLog(descriptor: descriptor)
    }()

    private let lock = NSLock()
    private let descriptor: Int32
    private var connections = 0

    private init(descriptor: Int32) { self.descriptor = descriptor }

    /// A number for a new connection, unique in this process.
    func connection() -> Int {
        lock.lock()
        defer { lock.unlock() }
        connections += 1
        return connections
    }

    func record(_ connection: Int, sent bytes: some Collection<UInt8>) {
        append(Array("\(connection)> \(Data(bytes).base64EncodedString())\n".utf8))
    }

    func record(_ connection: Int, received line: [UInt8]) {
        append(Array("\(connection)< ".utf8) + line + [0x0A])
    }

    private func append(_ record: [UInt8]) {
        lock.lock()
        defer { lock.unlock() }
        var written = 0
        while written < record.count {
            let count = record.withUnsafeBytes { write(descriptor, $0.baseAddress! + written, record.count - written) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return }
            written += count
        }
    }
}
