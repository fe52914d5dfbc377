import Glibc

/// What stops a run: a system call or SQLite call that failed, a daemon that hung up, stalled or answered out of
/// protocol.
enum BenchError: Error, CustomStringConvertible {
    case system(String, Int32)
    case closed(String)
    case stalled(String, seconds: Int)
    case protocolViolation(String)
    case setup(String)
    /// A SQLite call (or statement) and the message SQLite gave.
    case database(String, String)

    var description: String {
        switch self {
        case .system(let call, let code): return "\(call): \(String(cString: strerror(code)))"
        case .closed(let path): return "the daemon on \(path) closed the connection"
        case .stalled(let path, let seconds): return "the daemon on \(path) sent no answer for \(seconds) s"
        case .protocolViolation(let detail): return "unexpected answer: \(detail)"
        case .setup(let detail): return detail
        case .database(let call, let message): return "\(call): \(message)"
        }
    }
}
