import Foundation
import Glibc
import Synchronization

/// One line per notable event on stderr. Under systemd (`JOURNAL_STREAM` set) each line starts with
/// its syslog priority, `<3>` or `<5>`, which journald reads; elsewhere with the time.
public struct Log: Sendable {
    /// What is written: a level writes its own lines and those of the levels above it.
    public enum Level: Int, Sendable, Comparable {
        case error = 3, notice = 5, info = 6

        public init?(name: String) {
            switch name {
            case "error": self = .error
            case "notice": self = .notice
            case "info": self = .info
            default: return nil
            }
        }

        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    private let journal: Bool
    /// Shared by every copy, so that SIGHUP changes the level everywhere.
    private final class SharedLevel: Sendable {
        let value = Atomic<Int>(Level.notice.rawValue)
    }
    private let shared = SharedLevel()

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        journal = environment["JOURNAL_STREAM"] != nil
    }

    public func setLevel(_ newLevel: Level) { shared.value.store(newLevel.rawValue, ordering: .relaxed) }

    public func notice(_ message: String) { write(5, "", message) }
    public func error(_ message: String) { write(3, "error: ", message) }
    public func info(_ message: String) { write(6, "", message) }

    public func isWritten(_ candidate: Level) -> Bool { candidate.rawValue <= shared.value.load(ordering: .relaxed) }

    private func write(_ priority: Int, _ label: String, _ message: String) {
        guard priority <= shared.value.load(ordering: .relaxed) else { return }
        let line: String
        if journal {
            line = "<\(priority)>\(label)\(message)\n"
        } else {
            line = "\(Date().formatted(.iso8601)) foliod: \(label)\(message)\n"
        }
        _ = line.withCString { Glibc.write(2, $0, strlen($0)) }
    }
}
