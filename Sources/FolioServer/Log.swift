import Foundation
import Glibc

/// One line per notable event on stderr. Under systemd (`JOURNAL_STREAM` set) each line starts with
/// its syslog priority, `<3>` or `<5>`, which journald reads; elsewhere with the time.
public struct Log: Sendable {
    private let journal: Bool

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        journal = environment["JOURNAL_STREAM"] != nil
    }

    public func notice(_ message: String) { write(5, "", message) }
    public func error(_ message: String) { write(3, "error: ", message) }

    private func write(_ priority: Int, _ label: String, _ message: String) {
        let line: String
        if journal {
            line = "<\(priority)>\(label)\(message)\n"
        } else {
            line = "\(Date().formatted(.iso8601)) foliod: \(label)\(message)\n"
        }
        _ = line.withCString { Glibc.write(2, $0, strlen($0)) }
    }
}
